#include "comm/error_feedback.h"

#include <cmath>

namespace poseidon {

const float* Residual::carry(std::size_t from, const float* x, std::size_t m) {
  float* r = r_.data() + from;
  for (std::size_t i = 0; i < m; ++i) r[i] += x[i];
  return r;
}

void Residual::keep(std::size_t from, const float* read, std::size_t m) {
  float* r = r_.data() + from;
  for (std::size_t i = 0; i < m; ++i) {
    r[i] -= read[i];
    if (!std::isfinite(r[i])) r[i] = 0.0f;
  }
}

}  // namespace poseidon
