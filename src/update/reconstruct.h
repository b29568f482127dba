// Sufficient factor broadcasting, the arithmetic half (ATC'17 §3.2): from the factors of
// all P workers, U (P*K x M, the gradients at the layer's output) and V (P*K x N, the
// layer's inputs), the mean weight gradient is (1/P) U^T V and the mean bias gradient
// (1/P) times the column sums of U. Exact, not an approximation.
#pragma once

#include <cstdint>
#include <vector>

#include "update/sgd.h"

namespace poseidon {

struct SfbLayerState {
  std::int64_t M = 0, N = 0;
  float* weight = nullptr;                            // M x N, row-major, the engine's memory
  float* bias = nullptr;                              // M, or null
  std::vector<float> weight_momentum, bias_momentum;  // replicated optimizer state
  std::vector<float> block;                           // scratch for a block of gradient rows
  bool first_step = true;
};

// Applies one SGD step to the layer from the stacked factors (rows in worker-rank order,
// so every replica computes bit for bit the same), the mean gradient being scale * U^T V.
// The gradient is built a block of rows at a time and consumed while in cache; the full
// M x N gradient never exists.
void reconstructAndApply(SfbLayerState& layer, const float* U, const float* V, std::int64_t rows, float scale,
                         const SgdOptions& options);

// The part [offset, offset + length) of one tensor's mean gradient (tensor 0: the M x N
// weight, row-major; tensor 1: the bias) from stacked factors, into `out`. Used by a
// shard that receives factors and owns only some KV pairs of the layer.
void gradientSlice(const float* U, const float* V, std::int64_t rows, std::int64_t M, std::int64_t N, int tensor,
                   std::int64_t offset, std::int64_t length, float* out);

}  // namespace poseidon
