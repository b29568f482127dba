#include "poseidon/torch.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include <atomic>

#include "common/timeline.h"
#include "poseidon/errors.h"

namespace poseidon {

ModelInfo describeSequential(torch::nn::Sequential& net, const std::string& name) {
  ModelInfo info;
  info.name = name;
  int child = 0;
  for (const auto& m : net->children()) {
    auto params = m->parameters(/*recurse=*/true);
    ++child;
    if (params.empty()) continue;
    LayerInfo layer;
    layer.name = detail::cat(m->name(), child - 1);
    if (auto* fc = m->as<torch::nn::Linear>()) {
      layer.kind = LayerKind::kFC;
      layer.M = fc->options.out_features();
      layer.N = fc->options.in_features();
      layer.name = detail::cat("fc", child - 1);
    } else if (m->as<torch::nn::Conv2d>()) {
      layer.kind = LayerKind::kConv;
      layer.name = detail::cat("conv", child - 1);
    }
    for (const auto& p : m->named_parameters(/*recurse=*/true)) {
      layer.tensors.push_back(TensorInfo{p.key(), p.value().sizes().vec()});
    }
    info.layers.push_back(std::move(layer));
  }
  return info;
}

// Post-hooks on the gradient accumulators of every parameter (as DDP's reducer does):
// they run right after autograd has written a parameter's .grad. When the last tensor of
// a layer is done, the layer's gradient is complete and its sync starts.
struct TorchModel::Hooks {
  struct PostHook : torch::autograd::FunctionPostHook {
    PostHook(Hooks* hooks, int layer) : hooks(hooks), layer(layer) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      hooks->tensorDone(layer);
      return outputs;
    }
    Hooks* hooks;
    int layer;
  };

  Hooks(TorchModel& owner) : owner(owner), pending(owner.info_.layers.size()) {
    for (std::size_t l = 0; l < owner.layer_params_.size(); ++l) {
      if (owner.session_->usesFactors(static_cast<int>(l))) continue;  // see forward()
      for (auto& p : owner.layer_params_[l]) {
        auto acc = torch::autograd::impl::grad_accumulator(p);
        acc->add_post_hook(std::make_unique<PostHook>(this, static_cast<int>(l)));
        // The variable holds its accumulator weakly; keep it alive or the hook is lost.
        accumulators.push_back(std::move(acc));
      }
    }
    reset();
  }

  void reset() {
    for (std::size_t l = 0; l < pending.size(); ++l) pending[l] = static_cast<int>(owner.layer_params_[l].size());
  }
  // SFB layers report through the hooks installed by forward(), not through these.

  void tensorDone(int layer) {
    if (--pending[layer] != 0) return;
    std::vector<float*> grads;
    for (auto& p : owner.layer_params_[layer]) {
      POSEIDON_ENFORCE(p.grad().defined() && p.grad().is_contiguous(), "layer ", layer, " has no dense gradient");
      grads.push_back(p.grad().data_ptr<float>());
    }
    owner.markBackward(layer);
    owner.session_->gradientsReady(layer, std::move(grads));
  }

  TorchModel& owner;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<std::atomic<int>> pending;  // tensors of the layer still without gradient
};

TorchModel::TorchModel(Transport& transport, torch::nn::Sequential net, const std::string& name,
                       const Options& options)
    : net_(std::move(net)), info_(describeSequential(net_, name)) {
  std::vector<std::vector<float*>> buffers;
  for (const auto& m : net_->children()) {
    auto params = m->parameters(/*recurse=*/true);
    layer_of_child_.push_back(params.empty() ? -1 : static_cast<int>(layer_params_.size()));
    if (params.empty()) continue;
    std::vector<float*> ptrs;
    for (auto& p : params) {
      if (p.scalar_type() != torch::kFloat || !p.is_contiguous() || !p.device().is_cpu()) {
        throw InputError("Poseidon trains contiguous float32 CPU parameters only");
      }
      ptrs.push_back(p.data_ptr<float>());
    }
    layer_params_.push_back(params);
    buffers.push_back(std::move(ptrs));
  }
  session_ = std::make_unique<Session>(transport, info_, std::move(buffers), options);
  for (std::size_t l = 0; l < layer_params_.size(); ++l) {
    // SFB layers: autograd must not compute the dense weight gradient at all; the update
    // comes from the factors. Without requires_grad it computes only the input gradient.
    if (session_->usesFactors(static_cast<int>(l))) {
      for (auto& p : layer_params_[l]) p.set_requires_grad(false);
    }
  }
  if (session_->isWorker()) hooks_ = std::make_unique<Hooks>(*this);
}

TorchModel::~TorchModel() = default;

torch::Tensor TorchModel::forward(torch::Tensor x) {
  std::size_t child = 0;
  const bool training = torch::GradMode::is_enabled();
  Timeline* tl = training ? session_->timeline() : nullptr;
  for (auto& m : *net_) {
    const int layer = layer_of_child_[child++];
    if (layer >= 0) {
      TimelineSpan span(tl, "compute", tl ? "wait " + info_.layers[layer].name : "", "wait");
      session_->waitLayer(layer);
    }
    TimelineSpan span(tl, "compute", tl ? "forward " + (layer >= 0 ? info_.layers[layer].name : m.ptr()->name()) : "",
                      "forward");
    if (layer >= 0 && training && session_->usesFactors(layer)) {
      x = forwardWithFactors(m, layer, x);
    } else {
      x = m.forward(x);
    }
  }
  backward_mark_ = std::chrono::steady_clock::now();
  return x;
}

void TorchModel::markBackward(int layer) {
  Timeline* tl = session_->timeline();
  if (!tl) return;
  const auto now = std::chrono::steady_clock::now();
  tl->span("compute", "backward " + info_.layers[layer].name, "backward", backward_mark_, now);
  backward_mark_ = now;
}

// Sufficient factors of an FC layer y = x W^T + b: V = x (K x N) now, U = dL/dy (K x M)
// from a hook on y as soon as autograd has it, which starts the layer's SFB sync.
torch::Tensor TorchModel::forwardWithFactors(torch::nn::AnyModule& m, int layer, torch::Tensor x) {
  auto V = x.detach().contiguous();
  auto y = m.forward(x);
  if (!y.requires_grad()) {
    // Nothing below needs a gradient (e.g. the first layer): let autograd still deliver dL/dy.
    y = y.detach().requires_grad_(true);
  }
  Session* session = session_.get();
  y.register_hook([this, session, layer, V](torch::Tensor U) {
    markBackward(layer);
    U = U.contiguous();
    session->factorsReady(layer, U.data_ptr<float>(), V.data_ptr<float>(), V.size(0));
  });
  if (x.requires_grad()) {
    // dL/dx is the last use of W in this backward pass: from then on it may be updated.
    x.register_hook([session, layer](torch::Tensor) { session->layerReleased(layer); });
  }
  return y;
}

void TorchModel::step() {
  session_->endIteration();
  hooks_->reset();
}

void TorchModel::synchronize() { session_->waitAll(); }

void TorchModel::finish() { session_->finish(); }

}  // namespace poseidon
