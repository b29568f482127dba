// Sufficient factors of an FC layer y = x W^T + b on x [d0, ..., dk, N] (ATC'17 §3.2):
// V = x as [d0*...*dk, N] at the forward, U = dL/dy as [d0*...*dk, M] from a hook on y when
// autograd has it. Every call of the layer in every backward pass of a step adds an entry;
// the last pass's last hook hands the stacked entries over, which starts the SFB sync. The
// weight has requires_grad false, so autograd never computes its dense gradient.
#include "poseidon/errors.h"
#include "torch/autograd_sync.h"

namespace poseidon {

torch::Tensor AutogradSync::captureFactors(int layer, const torch::Tensor& x, torch::Tensor y) {
  const LayerInfo& info = model_.info.layers[layer];
  if (y.scalar_type() != torch::kFloat) {
    // Under autocast the dense gradient is a half-precision GEMM's result: the factors'
    // float32 reconstruction would round differently. The probe sends such layers by PS.
    throw InputError(detail::cat("layer '", info.name, "' computes in ", y.scalar_type(),
                                 " (autocast) but goes by sufficient factors, planned for float32: start the model "
                                 "(its first forward) under the same autocast, or use scheme='ps'"));
  }
  auto V = x.detach().reshape({-1, info.N}).contiguous();
  torch::Tensor out = y;
  if (!y.requires_grad()) {
    // Nothing below needs a gradient (e.g. the first layer): let autograd still deliver dL/dy,
    // to a leaf; what follows gets a copy, which it may change in place (ReLU(inplace)).
    y = y.detach().requires_grad_(true);
    out = y.clone();
  }
  const std::size_t entry = factors_[layer].size();
  factors_[layer].push_back(FactorEntry{torch::Tensor(), V, V._version()});
  const bool last = lastPass();
  y.register_hook([this, layer, entry, last, M = info.M](torch::Tensor U) {
    if (entry >= factors_[layer].size()) return;  // a graph from an earlier step
    FactorEntry& e = factors_[layer][entry];
    // autograd saved no copy of x for this layer (the weight needs no gradient): V is x.
    if (e.V._version() != e.version) {
      throw Error("the input of layer '" + model_.info.layers[layer].name +
                  "' was changed in place after its forward; its sufficient factors need it as it was "
                  "(clone it first, or choose the ps scheme)");
    }
    e.U = U.reshape({-1, M}).contiguous();
    if (!last) return;
    for (const auto& other : factors_[layer]) {
      if (!other.U.defined()) return;  // another call of this layer is still ahead in backward
    }
    reportFactors(layer);
  });
  if (x.requires_grad() && last) {
    // dL/dx is the last use of W in this backward pass; with several calls of the layer,
    // the last of their input gradients. From then on W may be updated.
    ++unreleased_[layer];
    x.register_hook([this, layer](torch::Tensor) {
      if (--unreleased_[layer] != 0) return;
      released_[layer] = true;
      // On autograd's stream now; the update stream waits for it (device-applied layers).
      if (appliers_[layer]) appliers_[layer]->released();
      // Through the staging queue: after this layer's factors have reached the session.
      staging_->then([this, layer] { session_->layerReleased(layer); });
    });
  }
  return out;
}

void AutogradSync::reportFactors(int layer) {
  const LayerInfo& info = model_.info.layers[layer];
  std::vector<torch::Tensor> us, vs;
  for (auto& e : factors_[layer]) {
    if (!e.U.defined()) continue;  // an output that did not reach the loss adds nothing
    us.push_back(e.U);
    vs.push_back(e.V);
  }
  // Every entry's rows, stacked in call order: the same stacking on U and V.
  const auto device = staging_->device();
  const auto stack = [device](std::vector<torch::Tensor>& parts, std::int64_t width) {
    if (parts.size() == 1) return parts[0];  // the usual case: no copy
    return parts.empty() ? torch::zeros({0, width}, device) : torch::cat(parts).contiguous();
  };
  const auto U = stack(us, info.M);
  const auto V = stack(vs, info.N);
  if (options_.gradient_mode && appliers_[layer]) {
    // The user's optimizer may have replaced .grad since the last step: point there now.
    appliers_[layer]->setGradientTarget(gradientsOf(layer));
  } else if (options_.gradient_mode) {
    // As above; a mirrored model: its host gradient buffers, copied to .grad after the step.
    auto grads = gradientsOf(layer);
    std::vector<float*> targets = staging_->mirrored() ? staging_->hostGradients(layer) : std::vector<float*>{};
    if (!staging_->mirrored()) {
      for (auto& g : grads) targets.push_back(g.data_ptr<float>());
    }
    staging_->then([this, layer, targets] { session_->setFactorGradients(layer, targets); });
  }
  reported_[layer] = true;
  // Used this step when some output reached the loss: the factors are cleared below, so
  // the step's unused-layer check reads it here.
  touched_[layer] = touched_[layer] || !us.empty();
  stale_[layer] = !options_.gradient_mode && !appliers_[layer];
  markBackward(layer);
  staging_->factorsOut(U, V, [this, layer](const torch::Tensor& u, const torch::Tensor& v) {
    session_->factorsReady(layer, u.data_ptr<float>(), v.data_ptr<float>(), u.size(0));
  });
  factors_[layer].clear();
}

}  // namespace poseidon
