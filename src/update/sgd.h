// Server-side optimizer: SGD with momentum and weight decay, with PyTorch's semantics
// (d = g + wd*p; buf = d on the first step, else momentum*buf + d; p -= lr*buf), fused
// into one pass over the pair. The gradient is the mean of the workers' contributions,
// summed in rank order so every run rounds the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "common/half.h"
#include "poseidon/sgd_options.h"

namespace poseidon {

// One step over n parameters (in gradient mode: the mean gradient into `params`). `grads` are the workers'
// contributions in rank order, summed and multiplied by `scale` (1/number of contributions; or one contribution that is
// already a sum, with scale 1/workers). `momentum_buf` may be null when momentum is 0; `first_step` initialises it.
void sgdStepViews(float* params, float* momentum_buf, const std::vector<GradientView>& grads, float scale,
                  std::int64_t n, const SgdOptions& options, bool first_step);
// The same with fp32 gradients.
void sgdStep(float* params, float* momentum_buf, const std::vector<const float*>& grads, float scale, std::int64_t n,
             const SgdOptions& options, bool first_step);

}  // namespace poseidon
