#include "update/reconstruct.h"

#include "common/gemm.h"


#include <algorithm>

namespace poseidon {

namespace {
// Rows of the weight gradient built per GEMM (~4 MB of it). Measured for fcnet's fc9
// (4096 x 6272, 128 factor rows, one thread): 249 ms with 41-row blocks, 233 ms with 256,
// 244 ms unblocked; the GEMM is bound by writing its output, so the size matters little.
constexpr std::int64_t kTargetBlockFloats = 1024 * 1024;
}  // namespace

void reconstructAndApply(SfbLayerState& s, const float* U, const float* V, std::int64_t rows, float scale,
                         const SgdOptions& o) {
  const bool momentum = o.momentum != 0.0f;
  if (momentum && s.weight_momentum.empty()) {
    s.weight_momentum.assign(static_cast<std::size_t>(s.M * s.N), 0.0f);
    if (s.bias) s.bias_momentum.assign(static_cast<std::size_t>(s.M), 0.0f);
  }
  const std::int64_t block_rows =
      std::max<std::int64_t>(1, std::min(s.M, kTargetBlockFloats / std::max<std::int64_t>(1, s.N)));
  s.block.resize(static_cast<std::size_t>(block_rows * s.N));
  for (std::int64_t r0 = 0; r0 < s.M; r0 += block_rows) {
    const std::int64_t nr = std::min(block_rows, s.M - r0);
    if (rows == 0) {
      // No worker used the layer this iteration: a zero gradient (BLAS may not write C for k = 0).
      std::fill(s.block.begin(), s.block.end(), 0.0f);
    } else {
      // block (nr x N) = scale * U[:, r0:r0+nr]^T (nr x rows) * V (rows x N)
      gemmTransposedA(static_cast<int>(nr), static_cast<int>(s.N), static_cast<int>(rows), scale, U + r0,
                      static_cast<int>(s.M), V, static_cast<int>(s.N), s.block.data(), static_cast<int>(s.N));
    }
    sgdStep(s.weight + r0 * s.N, momentum ? s.weight_momentum.data() + r0 * s.N : nullptr, {s.block.data()}, 1.0f,
            nr * s.N, o, s.first_step);
  }
  if (s.bias) {
    std::vector<float> g(static_cast<std::size_t>(s.M), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* u = U + r * s.M;
      for (std::int64_t m = 0; m < s.M; ++m) g[m] += u[m];
    }
    for (auto& x : g) x *= scale;
    sgdStep(s.bias, momentum ? s.bias_momentum.data() : nullptr, {g.data()}, 1.0f, s.M, o, s.first_step);
  }
  s.first_step = false;
}

void gradientSlice(const float* U, const float* V, std::int64_t rows, std::int64_t M, std::int64_t N, int tensor,
                   std::int64_t offset, std::int64_t length, float* out) {
  if (tensor == 1) {
    for (std::int64_t i = 0; i < length; ++i) out[i] = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* u = U + r * M + offset;
      for (std::int64_t i = 0; i < length; ++i) out[i] += u[i];
    }
    return;
  }
  // Whole rows covering the slice, then the slice itself.
  const std::int64_t r0 = offset / N, r1 = (offset + length - 1) / N;
  const std::int64_t nr = r1 - r0 + 1;
  std::vector<float> block(static_cast<std::size_t>(nr * N));
  gemmTransposedA(static_cast<int>(nr), static_cast<int>(N), static_cast<int>(rows), 1.0f, U + r0,
                  static_cast<int>(M), V, static_cast<int>(N), block.data(), static_cast<int>(N));
  const float* from = block.data() + (offset - r0 * N);
  for (std::int64_t i = 0; i < length; ++i) out[i] = from[i];
}

}  // namespace poseidon
