// Wait-free back-propagation's trigger: post-hooks_ on every parameter's gradient
// accumulator (as DDP's reducer does) run right after autograd has written the .grad; when
// the last tensor of a layer is done, the layer's sync starts. Layers that produced no
// gradient in a step contribute zeros, and those no rank used are left as they are (DDP's
// find_unused_parameters; AutogradSync::unusedByAll).
#include <torch/csrc/autograd/function_hook.h>

#include "poseidon/errors.h"
#include "poseidon/timeline.h"
#include "torch/autograd_sync.h"

namespace poseidon {

struct PostHook : torch::autograd::FunctionPostHook {
  PostHook(AutogradSync* impl, int layer) : impl(impl), layer(layer) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    impl->tensorDone(layer);
    return outputs;
  }
  AutogradSync* impl;
  int layer;
};

void AutogradSync::installHooks() {
  const int L = layerCount();
  pending_.assign(L, 0);
  reported_.assign(L, false);
  touched_.assign(L, false);
  factors_.assign(L, {});
  unreleased_.assign(L, 0);
  released_.assign(L, false);
  held_grads_.assign(L, {});
  for (int l = 0; l < L; ++l) {
    if (usesFactors(session_->plan()[l].scheme)) continue;  // reported by the hooks captureFactors sets
    for (auto& p : model_.params[l]) {
      auto acc = torch::autograd::impl::grad_accumulator(p);
      const auto key = acc->add_post_hook(std::make_unique<PostHook>(this, l));
      hooks_.emplace_back(std::move(acc), key);
    }
  }
  resetStep();
}

void AutogradSync::resetStep() {
  for (int l = 0; l < layerCount(); ++l) {
    pending_[l] = static_cast<int>(model_.params[l].size());
    factors_[l].clear();
    unreleased_[l] = 0;
    released_[l] = false;
  }
  reported_.assign(reported_.size(), false);
  touched_.assign(reported_.size(), false);
  forwards_ = 0;
}

void AutogradSync::tensorDone(int layer) {
  touched_[layer] = true;
  // Earlier passes of an accumulating step only add into .grad.
  if (!lastPass() || reported_[layer] || --pending_[layer] != 0) return;
  reportGradients(layer);
}

std::vector<torch::Tensor> AutogradSync::gradientsOf(int layer) {
  std::vector<torch::Tensor> grads;
  for (auto& p : model_.params[layer]) {
    // A tensor that got no gradient (unused this step) contributes zeros.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  return grads;
}

void AutogradSync::reportGradients(int layer) {
  auto grads = gradientsOf(layer);
  for (const auto& g : grads) {
    if (g.is_sparse() || !g.is_contiguous()) {
      throw InputError("layer '" + model_.info.layers[layer].name +
                       "' has a sparse or non-contiguous gradient; Poseidon syncs dense gradients (use "
                       "Embedding without sparse=true)");
    }
  }
  held_grads_[layer] = grads;
  reported_[layer] = true;
  // Server mode: the layer's values come back fresh into the host buffers.
  stale_[layer] = !options_.gradient_mode;
  markBackward(layer);
  staging_->gradientsOut(layer, grads, /*zero_device=*/!options_.gradient_mode,
                         [this, layer](std::vector<float*> ptrs, std::shared_ptr<const void> owner) {
                           session_->gradientsReady(layer, std::move(ptrs), std::move(owner));
                         });
}

void AutogradSync::reportRemaining() {
  for (int l = 0; l < layerCount(); ++l) {
    if (reported_[l]) continue;
    // A layer the forward waits for itself (poseidon::linear, a Python pre-hook) but did not run this time:
    // its previous sync must be over before this one starts.
    session_->waitLayer(l);
    if (usesFactors(session_->plan()[l].scheme)) {
      reportFactors(l);
    } else {
      reportGradients(l);
    }
  }
}

void AutogradSync::markBackward(int layer) {
  Timeline* tl = session_->timeline();
  if (!tl) return;
  const auto now = std::chrono::steady_clock::now();
  tl->span("compute", "backward " + model_.info.layers[layer].name, "backward", backward_mark_, now);
  backward_mark_ = now;
}

}  // namespace poseidon
