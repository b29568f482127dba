// Which training examples a worker reads: each epoch the whole set is shuffled with a
// permutation every rank derives from the seed; global step b takes the next
// workers * batch examples of it and worker w takes its own slice of those. The workers
// together see each example at most once per epoch, and a step of W workers at batch B
// covers exactly the examples of one worker at batch W * B.
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

class Partition {
 public:
  Partition(std::int64_t examples, int workers, int worker, std::int64_t batch, std::uint64_t seed);

  std::int64_t batchesPerEpoch() const { return examples_ / (batch_ * workers_); }
  // Indices of batch `b` (0-based, within the epoch) of `epoch` for this worker.
  std::vector<std::int64_t> batch(std::int64_t epoch, std::int64_t b);

 private:
  void shuffleFor(std::int64_t epoch);

  std::int64_t examples_;
  int workers_;
  int worker_;
  std::int64_t batch_;
  std::uint64_t seed_;
  std::int64_t shuffled_epoch_ = -1;
  std::vector<std::int64_t> order_;
};

}  // namespace poseidon
