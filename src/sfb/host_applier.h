// The session's own FactorApplier: the layer's weight and bias are host buffers (the
// engine's memory, or the gradient buffers in gradient mode). Reconstructs with the host's
// BLAS a block of rows at a time (reconstruct.h), fused with the SGD step.
#pragma once

#include <vector>

#include "poseidon/factor_applier.h"
#include "update/reconstruct.h"

namespace poseidon {

class HostFactorApplier final : public FactorApplier {
 public:
  // `params`: the weight (M x N), then the bias (M) if the layer has one.
  HostFactorApplier(std::int64_t M, std::int64_t N, const std::vector<float*>& params);

  // Gradient mode: the mean gradient goes here (weight, then bias) instead.
  void setTarget(const std::vector<float*>& target);

  void apply(const StackedFactors& factors, float scale, const SgdOptions& options, bool first_step) override;
  std::vector<StateRecord> replicated() override;
  void addMomentumRecords(const std::string& prefix, std::vector<StateRecord>& records) override;

 private:
  void makeMomentum();

  SfbLayerState state_;  // weight and bias point at the target
  std::vector<float*> params_;
};

}  // namespace poseidon
