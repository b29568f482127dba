#include "comm/error_feedback.h"

#include <cmath>

namespace poseidon {

const float* Residual::carry(const float* x) {
  for (std::size_t i = 0; i < r_.size(); ++i) r_[i] += x[i];
  return r_.data();
}

void Residual::keep(const float* read) {
  for (std::size_t i = 0; i < r_.size(); ++i) {
    r_[i] -= read[i];
    if (!std::isfinite(r_[i])) r_[i] = 0.0f;
  }
}

}  // namespace poseidon
