// Wait-free back-propagation's trigger: post-hooks on every parameter's gradient
// accumulator (as DDP's reducer does) run right after autograd has written the .grad; when
// the last tensor of a layer is done, the layer's sync starts. Layers that produced no
// gradient in a step contribute zeros (DDP's find_unused_parameters).
#include <torch/csrc/autograd/function_hook.h>

#include "common/timeline.h"
#include "poseidon/errors.h"
#include "torch/model_impl.h"

namespace poseidon {

namespace {
struct PostHook : torch::autograd::FunctionPostHook {
  PostHook(TorchModel::Impl* impl, int layer) : impl(impl), layer(layer) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    impl->tensorDone(layer);
    return outputs;
  }
  TorchModel::Impl* impl;
  int layer;
};
}  // namespace

void TorchModel::Impl::installHooks() {
  const int L = layerCount();
  pending.assign(L, 0);
  reported.assign(L, false);
  factors.assign(L, {});
  unreleased.assign(L, 0);
  rows_warned.assign(L, false);
  for (int l = 0; l < L; ++l) {
    if (session().usesFactors(l)) continue;  // reported by the hooks forwardWithFactors sets
    for (auto& p : layers.layers[l].params) {
      auto acc = torch::autograd::impl::grad_accumulator(p);
      const auto key = acc->add_post_hook(std::make_unique<PostHook>(this, l));
      hooks.emplace_back(std::move(acc), key);
    }
  }
  resetStep();
}

TorchModel::Impl::~Impl() {
  // A graph that outlives the model keeps the accumulators: no hook may call into us then.
  for (auto& [acc, key] : hooks) acc->del_post_hook(key);
}

void TorchModel::Impl::resetStep() {
  for (int l = 0; l < layerCount(); ++l) {
    pending[l] = static_cast<int>(layers.layers[l].params.size());
    factors[l].clear();
    unreleased[l] = 0;
  }
  reported.assign(reported.size(), false);
  forwards = 0;
}

void TorchModel::Impl::tensorDone(int layer) {
  // Earlier passes of an accumulating step only add into .grad.
  if (!lastPass() || reported[layer] || --pending[layer] != 0) return;
  reportGradients(layer);
}

void TorchModel::Impl::reportGradients(int layer) {
  std::vector<float*> grads;
  const auto& layer_info = layers.info.layers[layer];
  for (auto& p : layers.layers[layer].params) {
    // A tensor that got no gradient (unused this step) contributes zeros.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    if (p.grad().is_sparse() || !p.grad().is_contiguous()) {
      throw InputError("layer '" + layer_info.name +
                       "' has a sparse or non-contiguous gradient; Poseidon syncs dense gradients (use "
                       "Embedding without sparse=true)");
    }
    grads.push_back(p.grad().data_ptr<float>());
  }
  reported[layer] = true;
  markBackward(layer);
  session().gradientsReady(layer, std::move(grads));
}

void TorchModel::Impl::reportRemaining() {
  for (int l = 0; l < layerCount(); ++l) {
    if (reported[l]) continue;
    // A layer the forward waits for itself (poseidon::linear) but did not run this time:
    // its previous sync must be over before this one starts.
    session().waitLayer(l);
    if (session().usesFactors(l)) {
      reportFactors(l);
    } else {
      reportGradients(l);
    }
  }
}

void TorchModel::Impl::markBackward(int layer) {
  Timeline* tl = session().timeline();
  if (!tl) return;
  const auto now = std::chrono::steady_clock::now();
  tl->span("compute", "backward " + layers.info.layers[layer].name, "backward", backward_mark, now);
  backward_mark = now;
}

}  // namespace poseidon
