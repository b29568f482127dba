// Error feedback for a 16-bit wire (issue 38, as PowerSGD and 1-bit SGD): what rounding a
// KV pair's values lost is added to the same pair's next values, so it reaches the receiver
// late instead of never. One Residual per pair and direction: a worker's pushes (PsSyncer),
// a shard's BSP updates (ParameterServer); per allreduce bucket, a rank's contribution and
// its slices' sums or, stepped by owner, updates (sum16::Feedback). Not thread-safe: its owner serialises use.
#pragma once

#include <cstddef>
#include <vector>

namespace poseidon {

class Residual {
 public:
  explicit Residual(std::size_t n = 0) : r_(n, 0.0f) {}

  // x + the residual, in the residual's own memory (valid until keep()).
  const float* carry(const float* x) { return carry(0, x, r_.size()); }
  // carry() of values [from, from + m) alone: x[0, m) + the residual there.
  const float* carry(std::size_t from, const float* x, std::size_t m);
  // The receiver read `read` of carry()'s values: what it lost is the next residual. A
  // value that was not finite (an overflowing step, as under GradScaler) leaves none, so
  // one overflow costs one step, not every later one.
  void keep(const float* read) { keep(0, read, r_.size()); }
  // keep() of values [from, from + m) alone (a chunk of packHalfReading).
  void keep(std::size_t from, const float* read, std::size_t m);

  // Its memory, for checkpoints (a resumed run carries on with the same residual).
  float* data() { return r_.data(); }
  std::size_t size() const { return r_.size(); }

 private:
  std::vector<float> r_;
};

}  // namespace poseidon
