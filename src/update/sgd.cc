#include "update/sgd.h"

#include <algorithm>

namespace poseidon {

namespace {
// Block size keeps the summed gradient in L1 while it is consumed.
constexpr std::int64_t kBlock = 1024;

// The block [start, start + len) of one gradient: in place if fp32, else widened into `tmp`.
const float* blockOf(const GradientView& grad, std::int64_t start, std::int64_t len, float* tmp) {
  if (grad.fp32 != nullptr) return grad.fp32 + start;
  widen(grad.half, static_cast<std::size_t>(start), tmp, static_cast<std::size_t>(len));
  return tmp;
}

}  // namespace

void sgdStep(float* params, float* momentum_buf, const std::vector<const float*>& grads, float scale, std::int64_t n,
             const SgdOptions& o, bool first_step) {
  std::vector<GradientView> views(grads.size());
  for (std::size_t w = 0; w < grads.size(); ++w) views[w].fp32 = grads[w];
  sgdStepViews(params, momentum_buf, views, scale, n, o, first_step);
}

void sgdStepViews(float* params, float* momentum_buf, const std::vector<GradientView>& grads, float scale,
                  std::int64_t n, const SgdOptions& o, bool first_step) {
  float g[kBlock];
  float tmp[kBlock];
  const std::size_t k = grads.size();
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t len = std::min(kBlock, n - start);
    const float* g0 = blockOf(grads[0], start, len, g);
    for (std::int64_t i = 0; i < len; ++i) g[i] = g0[i];
    for (std::size_t w = 1; w < k; ++w) {
      const float* gw = blockOf(grads[w], start, len, tmp);
      for (std::int64_t i = 0; i < len; ++i) g[i] += gw[i];
    }
    if (scale != 1.0f) {
      for (std::int64_t i = 0; i < len; ++i) g[i] *= scale;
    }
    float* p = params + start;
    if (o.gradient_only) {
      for (std::int64_t i = 0; i < len; ++i) p[i] = g[i];
      continue;
    }
    if (o.weight_decay != 0.0f) {
      for (std::int64_t i = 0; i < len; ++i) g[i] = g[i] + p[i] * o.weight_decay;
    }
    if (o.momentum != 0.0f) {
      float* b = momentum_buf + start;
      if (first_step) {
        for (std::int64_t i = 0; i < len; ++i) b[i] = g[i];
      } else {
        for (std::int64_t i = 0; i < len; ++i) b[i] = b[i] * o.momentum + g[i];
      }
      for (std::int64_t i = 0; i < len; ++i) p[i] = p[i] + b[i] * -o.lr;
    } else {
      for (std::int64_t i = 0; i < len; ++i) p[i] = p[i] + g[i] * -o.lr;
    }
  }
}

}  // namespace poseidon
