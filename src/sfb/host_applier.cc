#include "sfb/host_applier.h"

namespace poseidon {

namespace {
StateRecord view(const std::string& name, float* data, std::int64_t floats) {
  return StateRecord{name, data, static_cast<std::size_t>(floats) * sizeof(float)};
}
}  // namespace

HostFactorApplier::HostFactorApplier(std::int64_t M, std::int64_t N, const std::vector<float*>& params)
    : params_(params) {
  state_.M = M;
  state_.N = N;
  setTarget(params);
}

void HostFactorApplier::setTarget(const std::vector<float*>& target) {
  state_.weight = target.at(0);
  state_.bias = target.size() > 1 ? target[1] : nullptr;
}

void HostFactorApplier::apply(const StackedFactors& f, float scale, const SgdOptions& options, bool first_step) {
  state_.first_step = first_step;
  reconstructAndApply(state_, f.U, f.V, f.rows, scale, options);
}

void HostFactorApplier::makeMomentum() {
  if (!state_.weight_momentum.empty()) return;
  state_.weight_momentum.assign(static_cast<std::size_t>(state_.M * state_.N), 0.0f);
  if (state_.bias) state_.bias_momentum.assign(static_cast<std::size_t>(state_.M), 0.0f);
}

std::vector<StateRecord> HostFactorApplier::replicated() {
  std::vector<StateRecord> out{view("weight", params_[0], state_.M * state_.N)};
  if (params_.size() > 1) out.push_back(view("bias", params_[1], state_.M));
  const auto floats = [](const std::vector<float>& v) { return static_cast<std::int64_t>(v.size()); };
  out.push_back(view("weight_momentum", state_.weight_momentum.data(), floats(state_.weight_momentum)));
  out.push_back(view("bias_momentum", state_.bias_momentum.data(), floats(state_.bias_momentum)));
  return out;
}

void HostFactorApplier::addMomentumRecords(const std::string& prefix, std::vector<StateRecord>& records) {
  makeMomentum();
  records.push_back(view(prefix + "weight_momentum", state_.weight_momentum.data(), state_.M * state_.N));
  if (state_.bias) records.push_back(view(prefix + "bias_momentum", state_.bias_momentum.data(), state_.M));
}

}  // namespace poseidon
