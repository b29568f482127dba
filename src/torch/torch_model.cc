#include "poseidon/torch.h"

#include "comm/control_channel.h"
#include "common/digest.h"
#include "common/timeline.h"
#include "poseidon/errors.h"
#include "torch/model_impl.h"

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
  m.self_waited.assign(m.layers.layers.size(), false);
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
  m.self_waited.assign(m.layers.layers.size(), false);
  if (probe && !net_.is_empty()) {
    throw InputError("a Sequential takes an example batch, not a probe: TorchModel(transport, net, name, options, "
                     "example)");
  }
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

TorchModel::ForwardScope::ForwardScope(TorchModel& model, bool per_child) : model_(model), outer_(t_forward) {
  Impl& m = *model.impl_;
  if (!m.probing) {
    // Everything that may throw comes before this scope takes effect.
    if (!per_child && !model.net_.is_empty()) {
      throw InputError("a Sequential runs with model.forward(x), which waits for and captures each child");
    }
    Session& s = m.session();
    if (m.training()) {
      if (m.forwards == m.options.backward_passes_per_step) {
        throw Error(detail::cat("a training forward pass after ", m.forwards,
                                " backward passes without step(); call step() once per ", m.forwards,
                                " (Options::backward_passes_per_step)"));
      }
      // Every forward starts from equal buffers (DDP's broadcast_buffers).
      m.buffers.makeEqual(s.control(), m.options.buffers, s.size());
    }
    for (int l = 0; l < m.layerCount() && !per_child; ++l) {
      if (!m.self_waited[l]) s.waitLayer(l);
    }
    if (m.training()) ++m.forwards;
    m.backward_mark = std::chrono::steady_clock::now();
  }
  t_forward = &model;
}

TorchModel::ForwardScope::~ForwardScope() {
  model_.impl_->backward_mark = std::chrono::steady_clock::now();
  t_forward = outer_;
}

namespace {
// A Sequential child that is one Linear layer: the adapter runs it (factors for SFB).
bool linearChild(const TorchModel::Impl& m, const std::vector<int>& layers_of_child, const torch::nn::Module& child) {
  return layers_of_child.size() == 1 && m.layers.layers[layers_of_child[0]].module == &child &&
         m.layers.layers[layers_of_child[0]].linear;
}
}  // namespace

torch::Tensor TorchModel::forward(torch::Tensor x) {
  if (net_.is_empty()) {
    throw InputError("forward(x) runs a Sequential; for model '" + info_.name +
                     "' call model.forward([&] { return net->forward(x); })");
  }
  ForwardScope scope(*this, /*per_child=*/true);
  Impl& m = *impl_;
  const bool probing = m.probing;
  Timeline* tl = !probing && m.training() ? m.session().timeline() : nullptr;
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
    x = linearChild(m, mine, *c.ptr()) ? m.runLinear(*c.ptr(), mine[0], x) : c.forward(x);
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
