// The optimizer step that the servers, and the workers for replicated layers, apply: SGD
// with momentum and weight decay with PyTorch's semantics (see kvstore/sgd.h), or in
// gradient mode no step at all (the mean gradient is written, the user's optimizer steps).
#pragma once

#include <cstdint>

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

}  // namespace poseidon
