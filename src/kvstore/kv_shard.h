// One parameter-server shard: the KV pairs the information book assigns to it, their
// optimizer state, and BSP aggregation. Each pair counts the workers' updates for the
// current iteration; when all have arrived the pair's step is applied and the pair is
// final. Not thread-safe: the ParameterServer's thread is its only user.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "comm/message.h"
#include "coordinator/information_book.h"
#include "kvstore/sgd.h"

namespace poseidon {

struct StateRecord;

// A worker's gradient for one pair: a pointer into a message it arrived in (kept alive
// here) or, for the co-located worker, straight into its engine gradient (zero copy).
struct Contribution {
  const float* data = nullptr;
  Message keep_alive;
};

class KVShard {
 public:
  // `storage(pair)` gives where the pair's parameter values live: on a rank that also
  // trains, that is the engine's own parameter memory, so the local worker needs no copy.
  // Pairs start at version `start` (a run resumed from a checkpoint of that iteration).
  KVShard(const InformationBook& book, int shard, const SgdOptions& options,
          const std::function<float*(const KVPair&)>& storage, std::uint64_t start = 0);

  // Records one worker's gradient of `key` for `iteration`. Returns true when this was the
  // last one missing and the pair has been updated. Throws CommError on a pair of another
  // shard, a wrong iteration or a duplicate.
  bool push(std::uint32_t key, std::uint64_t iteration, int worker, Contribution contribution);

  const float* values(std::uint32_t key) const { return state(key).values; }
  // Workers whose update of `key` for the current iteration has not arrived.
  int missing(std::uint32_t key) const { return workers_ - state(key).count; }
  // Number of steps applied to `key`.
  std::uint64_t version(std::uint32_t key) const { return state(key).version; }
  int shard() const { return shard_; }
  // Optimizer state for checkpoints: each pair's momentum, in key order (none without momentum).
  void addStateRecords(std::vector<StateRecord>& records);

 private:
  struct PairState {
    float* values = nullptr;
    std::vector<float> momentum;
    std::vector<Contribution> pending;  // by worker rank
    int count = 0;
    std::uint64_t version = 0;
  };
  const PairState& state(std::uint32_t key) const;

  const InformationBook& book_;
  const int shard_;
  const SgdOptions options_;
  const int workers_;
  std::unordered_map<std::uint32_t, PairState> pairs_;
};

}  // namespace poseidon
