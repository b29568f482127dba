#include "poseidon/torch.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include <atomic>
#include <cstdio>

#include "comm/control_channel.h"
#include "common/digest.h"
#include "common/timeline.h"
#include "poseidon/errors.h"
#include "torch/buffers.h"
#include "torch/module_layers.h"

namespace poseidon {

namespace {
// The model whose forward runs on this thread, for poseidon::linear and poseidon::waitFor
// (a scope, like LibTorch's grad mode, not a global: each thread has its own).
thread_local TorchModel* t_forward = nullptr;
}  // namespace

ModelInfo describeSequential(torch::nn::Sequential& net, const std::string& name) {
  return discoverLayers(*net.ptr(), name, /*sequential_root=*/true).info;
}

ModelInfo describeModule(torch::nn::Module& module, const std::string& name) {
  return discoverLayers(module, name, /*sequential_root=*/false).info;
}

// One step's sufficient factors of an SFB layer: an entry per call of the layer in each
// backward pass, V at its forward, U when autograd reaches its output.
struct FactorEntry {
  torch::Tensor U, V;
};

struct TorchModel::Impl {
  // Post-hook on a parameter's gradient accumulator (as DDP's reducer does): it runs right
  // after autograd has written the parameter's .grad.
  struct PostHook : torch::autograd::FunctionPostHook {
    PostHook(Impl* impl, int layer) : impl(impl), layer(layer) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      impl->tensorDone(layer);
      return outputs;
    }
    Impl* impl;
    int layer;
  };

  Impl(TorchModel& owner, ModuleLayers layers, const Options& options)
      : owner(owner), layers(std::move(layers)), options(options), buffers(*owner.module_) {}

  TorchModel& owner;
  ModuleLayers layers;
  const Options options;
  ModelBuffers buffers;
  std::vector<bool> self_waited;  // by layer: waited for inside the forward, not up front
  bool probing = false;
  std::int64_t probe_batch = 0;
  std::vector<std::int64_t> probe_rows;  // by layer: factor rows the probe saw; 0 if none

  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // keeps the hooks alive
  std::vector<int> pending;     // tensors of the layer without gradient in the last pass
  std::vector<bool> reported;   // layers whose sync has been handed over this step
  int forwards = 0;             // training forward passes since the last step()
  std::vector<std::vector<FactorEntry>> factors;  // SFB layers: this step's entries
  std::vector<bool> rows_warned;
  std::chrono::steady_clock::time_point backward_mark;

  Session& session() { return *owner.session_; }
  int layerCount() const { return static_cast<int>(layers.layers.size()); }
  bool lastPass() const { return forwards == options.backward_passes_per_step; }

  void installHooks();
  void resetStep();
  void tensorDone(int layer);
  void reportGradients(int layer);
  void reportFactors(int layer);
  void reportRemaining();
  torch::Tensor forwardWithFactors(torch::nn::Module& fc, int layer, const torch::Tensor& x);
  torch::Tensor runLinear(torch::nn::Module& fc, int layer, const torch::Tensor& x);
  void markBackward(int layer);
};

void TorchModel::Impl::installHooks() {
  const int L = layerCount();
  pending.assign(L, 0);
  reported.assign(L, false);
  factors.assign(L, {});
  rows_warned.assign(L, false);
  for (int l = 0; l < L; ++l) {
    if (session().usesFactors(l)) continue;  // reported by the hooks forwardWithFactors sets
    for (auto& p : layers.layers[l].params) {
      auto acc = torch::autograd::impl::grad_accumulator(p);
      acc->add_post_hook(std::make_unique<PostHook>(this, l));
      // The variable holds its accumulator weakly; keep it alive or the hook is lost.
      accumulators.push_back(std::move(acc));
    }
  }
  resetStep();
}

void TorchModel::Impl::resetStep() {
  for (int l = 0; l < layerCount(); ++l) {
    pending[l] = static_cast<int>(layers.layers[l].params.size());
    factors[l].clear();
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
  for (auto& p : layers.layers[layer].params) {
    // A tensor that got no gradient (unused this step) contributes zeros, as DDP's
    // find_unused_parameters.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    POSEIDON_ENFORCE(p.grad().is_contiguous(), "layer ", layer, " has no dense contiguous gradient");
    grads.push_back(p.grad().data_ptr<float>());
  }
  reported[layer] = true;
  markBackward(layer);
  session().gradientsReady(layer, std::move(grads));
}

void TorchModel::Impl::reportFactors(int layer) {
  const LayerInfo& info = layers.info.layers[layer];
  std::vector<torch::Tensor> us, vs;
  for (auto& e : factors[layer]) {
    if (!e.U.defined()) continue;  // an output that did not reach the loss adds nothing
    us.push_back(e.U);
    vs.push_back(e.V);
  }
  // Every entry's rows, stacked in call order: the same stacking on U and V.
  const auto stack = [](std::vector<torch::Tensor>& parts, std::int64_t width) {
    if (parts.size() == 1) return parts[0];  // the usual case: no copy
    return parts.empty() ? torch::zeros({0, width}) : torch::cat(parts).contiguous();
  };
  const auto U = stack(us, info.M);
  const auto V = stack(vs, info.N);
  if (options.gradient_mode) {
    std::vector<float*> grads;
    for (auto& p : layers.layers[layer].params) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad().data_ptr<float>());
    }
    session().setFactorGradients(layer, std::move(grads));
  }
  reported[layer] = true;
  markBackward(layer);
  session().factorsReady(layer, U.data_ptr<float>(), V.data_ptr<float>(), U.size(0));
  factors[layer].clear();
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

// Sufficient factors of an FC layer y = x W^T + b on x [d0, ..., dk, N]: V = x as
// [d0*...*dk, N] now, U = dL/dy as [d0*...*dk, M] from a hook on y when autograd has it.
// On the step's last pass, the last hook hands every entry over and starts the sync.
torch::Tensor TorchModel::Impl::forwardWithFactors(torch::nn::Module& fc, int layer, const torch::Tensor& x) {
  const LayerInfo& info = layers.info.layers[layer];
  auto V = x.detach().reshape({-1, info.N}).contiguous();
  const std::int64_t rows = V.size(0), batch = x.dim() > 1 ? x.size(0) : 1;
  if (!rows_warned[layer] && info.rows_per_example * batch != rows && batch > 0 && rows % batch == 0) {
    rows_warned[layer] = true;
    std::fprintf(stderr,
                 "poseidon: layer '%s' makes %lld factor rows per example, the cost model assumed %lld: give "
                 "TorchModel an example batch (a probe) so it plans with the real figure\n",
                 info.name.c_str(), static_cast<long long>(rows / batch), static_cast<long long>(info.rows_per_example));
  }
  auto y = fc.as<torch::nn::Linear>()->forward(x);
  if (!y.requires_grad()) {
    // Nothing below needs a gradient (e.g. the first layer): let autograd still deliver dL/dy.
    y = y.detach().requires_grad_(true);
  }
  const std::size_t entry = factors[layer].size();
  factors[layer].push_back(FactorEntry{torch::Tensor(), V});
  const bool last = lastPass();
  y.register_hook([this, layer, entry, last, M = info.M](torch::Tensor U) {
    if (entry >= factors[layer].size()) return;  // a graph from an earlier step
    factors[layer][entry].U = U.reshape({-1, M}).contiguous();
    if (!last) return;
    for (const auto& e : factors[layer]) {
      if (!e.U.defined()) return;  // another call of this layer is still ahead in backward
    }
    reportFactors(layer);
  });
  if (x.requires_grad() && last) {
    // dL/dx is the last use of W in this backward pass: from then on it may be updated.
    Session* s = &session();
    x.register_hook([s, layer](torch::Tensor) { s->layerReleased(layer); });
  }
  return y;
}

torch::Tensor TorchModel::Impl::runLinear(torch::nn::Module& fc, int layer, const torch::Tensor& x) {
  if (probing) {
    const std::int64_t n = x.dim() > 0 ? x.size(-1) : 1;
    probe_rows[layer] = std::max<std::int64_t>(1, (x.numel() / std::max<std::int64_t>(1, n)) / std::max<std::int64_t>(1, probe_batch));
    return fc.as<torch::nn::Linear>()->forward(x);
  }
  if (torch::GradMode::is_enabled() && session().usesFactors(layer)) return forwardWithFactors(fc, layer, x);
  return fc.as<torch::nn::Linear>()->forward(x);
}

// --- construction ---

namespace {
// Runs a probe forward without leaving a trace: no gradients, and the buffers (BatchNorm
// statistics) and the random generator (dropout) as they were.
void runWithoutTrace(torch::nn::Module& module, const std::function<void()>& run) {
  std::vector<torch::Tensor> saved;
  for (auto& b : module.buffers()) saved.push_back(b.detach().clone());
  const auto random = randomState();
  {
    torch::NoGradGuard no_grad;
    run();
  }
  auto buffers = module.buffers();
  for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].detach().copy_(saved[i]);
  setRandomState(random);
}
}  // namespace

TorchModel::TorchModel(Transport& transport, torch::nn::Sequential net, const std::string& name,
                       const Options& options, torch::Tensor example)
    : net_(net), module_(net.ptr()) {
  impl_ = std::make_unique<Impl>(*this, discoverLayers(*module_, name, /*sequential_root=*/true), options);
  Impl& m = *impl_;
  m.self_waited.assign(m.layers.layers.size(), true);  // forward(x) waits child by child
  if (example.defined()) {
    m.probe_rows.assign(m.layers.layers.size(), 0);
    m.probe_batch = example.size(0);
    m.probing = true;
    runWithoutTrace(*module_, [&] { forward(example); });
    m.probing = false;
    for (std::size_t l = 0; l < m.probe_rows.size(); ++l) {
      if (m.probe_rows[l] > 0) m.layers.info.layers[l].rows_per_example = m.probe_rows[l];
    }
  }
  info_ = m.layers.info;
  start(transport);
}

TorchModel::TorchModel(Transport& transport, std::shared_ptr<torch::nn::Module> module, const std::string& name,
                       const Options& options, std::function<void()> probe)
    : module_(std::move(module)) {
  if (!module_) throw InputError("TorchModel: no module given");
  if (auto seq = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module_)) net_ = torch::nn::Sequential(seq);
  impl_ = std::make_unique<Impl>(*this, discoverLayers(*module_, name, /*sequential_root=*/!net_.is_empty()), options);
  Impl& m = *impl_;
  m.self_waited.assign(m.layers.layers.size(), !net_.is_empty());
  if (probe) {
    m.probe_rows.assign(m.layers.layers.size(), 0);
    m.probe_batch = options.batch;
    m.probing = true;
    runWithoutTrace(*module_, [&] {
      ForwardScope scope(*this);
      probe();
    });
    m.probing = false;
    // A Linear that went through poseidon::linear() can have its factors captured.
    for (std::size_t l = 0; l < m.probe_rows.size(); ++l) {
      auto& info = m.layers.info.layers[l];
      if (m.probe_rows[l] == 0) continue;
      info.rows_per_example = m.probe_rows[l];
      info.factorable = info.kind == LayerKind::kFC;
    }
  }
  info_ = m.layers.info;
  start(transport);
}

void TorchModel::start(Transport& transport) {
  Impl& m = *impl_;
  if (m.layers.layers.empty()) {
    throw InputError("model '" + info_.name + "' has no trainable parameters: nothing to train data-parallel");
  }
  std::vector<std::vector<float*>> params;
  for (auto& layer : m.layers.layers) {
    std::vector<float*> ptrs;
    for (auto& p : layer.params) ptrs.push_back(p.data_ptr<float>());
    params.push_back(std::move(ptrs));
  }
  if (!m.buffers.empty() && m.options.server_ranks > 0) {
    throw InputError("a model with buffers (BatchNorm statistics) keeps them equal with collectives among all ranks: "
                     "drop --server-ranks");
  }
  session_ = std::make_unique<Session>(transport, info_, std::move(params), m.options);
  // Rank 0's buffers and frozen parameters, as its trained parameters (DDP does the same).
  m.buffers.broadcast(session_->control());
  for (auto& p : module_->named_parameters()) {
    if (p.value().requires_grad()) continue;
    auto t = p.value().detach();
    POSEIDON_ENFORCE(t.scalar_type() == torch::kFloat && t.is_contiguous(), "frozen parameter ", p.key(),
                     " is not contiguous float32");
    session_->control().broadcastFloats(t.data_ptr<float>(), static_cast<std::size_t>(t.numel()), 0,
                                        "frozen parameter " + p.key());
  }
  for (int l = 0; l < m.layerCount(); ++l) {
    // SFB layers: autograd must not compute the dense weight gradient at all; the update
    // comes from the factors. Without requires_grad it computes only the input gradient.
    if (session_->usesFactors(l)) {
      for (auto& p : m.layers.layers[l].params) p.set_requires_grad(false);
    }
  }
  if (session_->isWorker()) m.installHooks();
}

TorchModel::~TorchModel() {
  // The module outlives its wrapper: SFB weights train by autograd again (a new wrapper
  // sees the same layers).
  if (!session_) return;
  for (int l = 0; l < impl_->layerCount(); ++l) {
    if (!session_->usesFactors(l)) continue;
    for (auto& p : impl_->layers.layers[l].params) p.set_requires_grad(true);
  }
}

torch::nn::Sequential& TorchModel::net() {
  if (net_.is_empty()) throw InputError("model '" + info_.name + "' is not a Sequential");
  return net_;
}

// --- one iteration ---

TorchModel::ForwardScope::ForwardScope(TorchModel& model) : model_(model), outer_(t_forward) {
  Impl& m = *model.impl_;
  t_forward = &model;
  if (m.probing) return;
  Session& s = m.session();
  if (torch::GradMode::is_enabled()) {
    if (m.forwards == m.options.backward_passes_per_step) {
      t_forward = outer_;
      throw Error(detail::cat("a training forward pass after ", m.forwards,
                              " backward passes without step(); call step() once per ", m.forwards,
                              " (Options::backward_passes_per_step)"));
    }
    ++m.forwards;
    // Every forward starts from equal buffers (DDP's broadcast_buffers).
    if (model.module_->is_training()) m.buffers.makeEqual(s.control(), m.options.buffers, s.size());
  }
  for (int l = 0; l < m.layerCount(); ++l) {
    if (!m.self_waited[l]) s.waitLayer(l);
  }
  m.backward_mark = std::chrono::steady_clock::now();
}

TorchModel::ForwardScope::~ForwardScope() {
  model_.impl_->backward_mark = std::chrono::steady_clock::now();
  t_forward = outer_;
}

torch::Tensor TorchModel::forward(torch::Tensor x) {
  if (net_.is_empty()) {
    throw InputError("forward(x) runs a Sequential; for model '" + info_.name +
                     "' call model.forward([&] { return net->forward(x); })");
  }
  ForwardScope scope(*this);
  Impl& m = *impl_;
  const bool probing = m.probing;
  Timeline* tl = !probing && torch::GradMode::is_enabled() ? m.session().timeline() : nullptr;
  std::size_t child = 0;
  for (auto& c : *net_) {
    const auto& mine = m.layers.layers_of_child[child++];
    for (int l : mine) {
      if (probing) continue;
      TimelineSpan span(tl, "compute", tl ? "wait " + info_.layers[l].name : "", "wait");
      m.session().waitLayer(l);
    }
    TimelineSpan span(tl, "compute", tl ? "forward " + (mine.empty() ? c.ptr()->name() : info_.layers[mine[0]].name) : "",
                      "forward");
    const int fc = mine.size() == 1 && m.layers.layers[mine[0]].module == c.ptr().get() &&
                           m.layers.layers[mine[0]].linear
                       ? mine[0]
                       : -1;
    x = fc >= 0 ? m.runLinear(*c.ptr(), fc, x) : c.forward(x);
  }
  return x;
}

void TorchModel::step() {
  Impl& m = *impl_;
  if (!session_->isWorker()) throw Error("step() on a rank that does not train");
  if (m.forwards != m.options.backward_passes_per_step) {
    throw Error(detail::cat("step() after ", m.forwards, " training forward pass", m.forwards == 1 ? "" : "es",
                            "; Options::backward_passes_per_step is ", m.options.backward_passes_per_step));
  }
  m.reportRemaining();
  session_->endIteration();
  m.resetStep();
  // Gradient mode: the user's optimizer steps next and needs every mean gradient.
  if (m.options.gradient_mode) session_->waitAll();
}

void TorchModel::synchronize() {
  session_->waitAll();
  impl_->buffers.makeEqual(session_->control(), impl_->options.buffers, session_->size());
}

void TorchModel::finish() { session_->finish(); }

std::vector<StateRecord> TorchModel::stateRecords() {
  auto records = session_->stateRecords();
  impl_->buffers.addStateRecords(records);
  return records;
}

std::string TorchModel::digest() {
  Digest d;
  for (const auto& p : module_->parameters()) d.update(p.data_ptr<float>(), p.numel() * sizeof(float));
  impl_->buffers.addToDigest(d);
  return d.hex();
}

// --- inside a custom forward ---

torch::Tensor linear(torch::nn::Linear& fc, const torch::Tensor& x) {
  TorchModel* model = t_forward;
  if (!model) return fc->forward(x);
  auto& m = *model->impl_;
  const auto it = m.layers.layer_of_module.find(fc.ptr().get());
  if (it == m.layers.layer_of_module.end() || !m.layers.layers[it->second].linear) return fc->forward(x);
  const int layer = it->second;
  if (m.probing) {
    m.self_waited[layer] = true;
  } else {
    m.session().waitLayer(layer);
  }
  return m.runLinear(*fc.ptr(), layer, x);
}

void waitFor(const torch::nn::Module& module) {
  TorchModel* model = t_forward;
  if (!model) return;
  auto& m = *model->impl_;
  const auto it = m.layers.layers_under.find(&module);
  if (it == m.layers.layers_under.end()) return;
  for (int l : it->second) {
    if (m.probing) {
      m.self_waited[l] = true;
    } else {
      m.session().waitLayer(l);
    }
  }
}

}  // namespace poseidon
