// A stress run of one KVStore design, shared by the threads-as-ranks unit test and the
// real mpirun test: every iteration pushes the push/pull tasks of every key in one fixed
// order (descending keys, as back-propagation would), then makes the keys' "gradients"
// ready in an order and with delays drawn at random per rank and iteration, and checks
// every pulled sum bit for bit against the ring-order sum (multiples of 1/8, one value in 11
// with +-2^25 (rank + 1) added, where fp32's sum depends on the order; on a bf16 wire, the
// 16-bit allreduce's roundings reproduced value by value, with error feedback's residuals
// too when the options ask for it). Then one sum of each size in place (send == recv), straight
// on a communicator, with the same check, and one step by owner of each size
// (Communicator::stepped, on the options' wire) into targets cut in three pieces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allreduce/kvstore.h"

namespace poseidon {

class Transport;

struct StressResult {
  std::int64_t collectives = 0;
  std::int64_t wrong_values = 0;
  double seconds = 0;
};

// The rank-order sum of a step by owner's contributions (an OwnerStep's `from`), widened
// one by one: what the tests' steps read, written apart from sgdStepViews.
std::vector<float> rankOrderSum(const std::vector<GradientView>& from, std::size_t n);

StressResult runKVStoreStress(Transport& transport, const KVStoreOptions& options, int iterations, std::uint64_t seed);

}  // namespace poseidon
