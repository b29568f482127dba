// Server-side optimizer: SGD with momentum and weight decay, with PyTorch's semantics
// (d = g + wd*p; buf = d on the first step, else momentum*buf + d; p -= lr*buf), fused
// into one pass over the pair. The gradient is the mean of the workers' contributions,
// summed in rank order so every run rounds the same way.
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  // Linear decay of lr to zero over this many iterations; 0 keeps lr constant.
  std::int64_t decay_iterations = 0;
  // Gradient mode: a "step" writes the mean gradient where the parameters would be, and
  // the workers' own optimizer steps. Every other field is then unused.
  bool gradient_only = false;
  // Backward passes accumulated into each contribution: the mean divides by these too.
  int passes = 1;

  // The options of the step that iteration t applies (every rank computes the same).
  SgdOptions at(std::uint64_t t) const {
    SgdOptions o = *this;
    if (decay_iterations > 0) {
      const double left = 1.0 - static_cast<double>(t) / static_cast<double>(decay_iterations);
      o.lr = static_cast<float>(lr * (left > 0 ? left : 0.0));
    }
    return o;
  }
};

// One step over n parameters (in gradient mode: the mean gradient into `params`). `grads` are the workers'
// contributions in rank order, summed and multiplied by `scale` (1/number of contributions; or one contribution that is
// already a sum, with scale 1/workers). `momentum_buf` may be null when momentum is 0; `first_step` initialises it.
void sgdStep(float* params, float* momentum_buf, const std::vector<const float*>& grads, float scale, std::int64_t n,
             const SgdOptions& options, bool first_step);

}  // namespace poseidon
