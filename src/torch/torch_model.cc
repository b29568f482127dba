#include "poseidon/torch.h"

#include <optional>

#include "common/digest.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"
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
  // The CPU's generator, and the one of the module's GPU (where its dropout draws).
  std::optional<torch::Device> gpu;
  for (const auto& p : module.parameters()) {
    if (!p.device().is_cpu()) gpu = p.device();
  }
  const auto random = randomState();
  const auto gpu_random = gpu ? randomState(*gpu) : std::vector<std::uint8_t>{};
  {
    torch::NoGradGuard no_grad;
    run();
  }
  auto buffers = module.buffers();
  for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].detach().copy_(saved[i]);
  setRandomState(random);
  if (gpu) setRandomState(gpu_random, *gpu);
}

ModelTensors tensorsOf(const ModuleLayers& layers, torch::nn::Module& root) {
  ModelTensors t;
  t.info = layers.info;
  for (const auto& layer : layers.layers) t.params.push_back(layer.params);
  t.buffers = namedBuffers(root);
  for (const auto& p : root.named_parameters()) {
    if (!p.value().requires_grad()) t.frozen.push_back(NamedTensor{p.key(), p.value()});
    t.all.push_back(p.value());
  }
  return t;
}
}  // namespace

TorchModel::TorchModel(Transport& transport, torch::nn::Sequential net, const std::string& name, const Options& options,
                       torch::Tensor example)
    : net_(net), module_(net.ptr()), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.layers = discoverLayers(*module_, name, /*sequential_root=*/true);
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
  start(transport, options);
}

TorchModel::TorchModel(Transport& transport, std::shared_ptr<torch::nn::Module> module, const std::string& name,
                       const Options& options, std::function<void()> probe)
    : module_(std::move(module)), impl_(std::make_unique<Impl>()) {
  if (!module_) throw InputError("TorchModel: no module given");
  if (auto seq = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module_)) net_ = torch::nn::Sequential(seq);
  Impl& m = *impl_;
  m.layers = discoverLayers(*module_, name, /*sequential_root=*/!net_.is_empty());
  m.self_waited.assign(m.layers.layers.size(), false);
  if (probe && !net_.is_empty()) {
    throw InputError(
        "a Sequential takes an example batch, not a probe: TorchModel(transport, net, name, options, "
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
  start(transport, options);
}

void TorchModel::start(Transport& transport, const Options& options) {
  Impl& m = *impl_;
  info_ = m.layers.info;
  m.sync = std::make_unique<AutogradSync>(tensorsOf(m.layers, *module_), options);
  for (int l = 0; l < m.layerCount(); ++l) {
    if (m.self_waited[l]) m.sync->setSelfWaited(l);
  }
  m.sync->start(transport);
}

TorchModel::~TorchModel() = default;

Session& TorchModel::session() { return impl_->sync->session(); }

torch::nn::Sequential& TorchModel::net() {
  if (net_.is_empty()) throw InputError("model '" + info_.name + "' is not a Sequential");
  return net_;
}

// --- one iteration ---

namespace {
// A forward that trains: gradients on and the module in training mode.
bool trainingForward(torch::nn::Module& module) { return torch::GradMode::is_enabled() && module.is_training(); }
}  // namespace

TorchModel::ForwardScope::ForwardScope(TorchModel& model, bool per_child) : model_(model), outer_(t_forward) {
  Impl& m = *model.impl_;
  if (!m.probing) {
    // Everything that may throw comes before this scope takes effect.
    if (!per_child && !model.net_.is_empty()) {
      throw InputError("a Sequential runs with model.forward(x), which waits for and captures each child");
    }
    m.sync->beginForward(trainingForward(*model.module_), per_child, /*no_sync=*/false);
  }
  t_forward = &model;
}

TorchModel::ForwardScope::~ForwardScope() {
  if (!model_.impl_->probing) model_.impl_->sync->endForward();
  t_forward = outer_;
}

namespace {
// A Sequential child that is one Linear layer: the adapter runs it (factors for SFB).
bool linearChild(const TorchModel::Impl& m, const std::vector<int>& layers_of_child, const torch::nn::Module& child) {
  return layers_of_child.size() == 1 && m.layers.layers[layers_of_child[0]].module == &child &&
         m.layers.layers[layers_of_child[0]].linear;
}
}  // namespace

torch::Tensor TorchModel::Impl::runLinear(torch::nn::Module& fc, int layer, const torch::Tensor& x) {
  auto& linear = *fc.as<torch::nn::Linear>();
  if (probing) {
    // Factor rows per example, with the probe's batch (the first dimension of its input).
    const std::int64_t n = x.dim() > 0 ? x.size(-1) : 1;
    const std::int64_t rows = x.numel() / std::max<std::int64_t>(1, n);
    probe_rows[layer] = std::max<std::int64_t>(1, rows / std::max<std::int64_t>(1, probe_batch));
    return linear.forward(x);
  }
  auto y = linear.forward(x);
  return sync->factorsWanted(layer) ? sync->captureFactors(layer, x, y) : y;
}

torch::Tensor TorchModel::forward(torch::Tensor x) {
  if (net_.is_empty()) {
    throw InputError("forward(x) runs a Sequential; for model '" + info_.name +
                     "' call model.forward([&] { return net->forward(x); })");
  }
  ForwardScope scope(*this, /*per_child=*/true);
  Impl& m = *impl_;
  const bool probing = m.probing;
  Timeline* tl = !probing && trainingForward(*module_) ? session().timeline() : nullptr;
  std::size_t child = 0;
  for (auto& c : *net_) {
    const auto& mine = m.layers.layers_of_child[child++];
    for (int l : mine) {
      if (probing) continue;
      TimelineSpan span(tl, "compute", tl ? "wait " + info_.layers[l].name : "", "wait");
      m.sync->waitLayer(l);
    }
    TimelineSpan span(tl, "compute",
                      tl ? "forward " + (mine.empty() ? c.ptr()->name() : info_.layers[mine[0]].name) : "", "forward");
    x = linearChild(m, mine, *c.ptr()) ? m.runLinear(*c.ptr(), mine[0], x) : c.forward(x);
  }
  return x;
}

void TorchModel::step() { impl_->sync->step(); }

void TorchModel::synchronize() { impl_->sync->synchronize(); }

void TorchModel::finish() { impl_->sync->finish(); }

std::vector<StateRecord> TorchModel::stateRecords() { return impl_->sync->stateRecords(); }

void TorchModel::stateRestored() { impl_->sync->stateRestored(); }

torch::Device TorchModel::device() const { return impl_->sync->device(); }

std::string TorchModel::digest() { return impl_->sync->digest(); }

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
    m.sync->waitLayer(layer);
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
      m.sync->waitLayer(l);
    }
  }
}

}  // namespace poseidon
