#include "torch/autograd_sync.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "comm/equal_everywhere.h"
#include "common/digest.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

// POSEIDON_MIRROR_ON_CPU=1 runs any CPU job through the GPU path's mirrors and staged
// copies (synchronous): how CI, which has no GPU, tests that bookkeeping.
bool mirrorOnCpu(const ModelTensors& model) {
  const char* mirror = std::getenv("POSEIDON_MIRROR_ON_CPU");
  return model.mirror_on_cpu || (mirror && std::string(mirror) == "1");
}

}  // namespace

AutogradSync::AutogradSync(ModelTensors model, const Options& options)
    : model_(std::move(model)),
      options_(options),
      buffers_(std::move(model_.buffers), mirrorOnCpu(model_)),
      self_waited_(model_.params.size(), false) {
  if (model_.params.empty()) {
    throw InputError("model '" + model_.info.name + "' has no trainable parameters: nothing to train data-parallel");
  }
  POSEIDON_ENFORCE_EQ(model_.params.size(), model_.info.layers.size(), "layers of model ", model_.info.name);
}

void AutogradSync::start(Transport& transport) {
  staging_ = std::make_unique<DeviceStaging>(model_.params, mirrorOnCpu(model_));
  stale_.assign(model_.params.size(), false);
  if (!buffers_.empty() && options_.server_ranks > 0) {
    throw OptionError(
        "a model with buffers (BatchNorm statistics) keeps them equal with collectives among all ranks: "
        "drop {server_ranks}");
  }
  // The session broadcasts rank 0's values into the host buffers; the device gets them after.
  staging_->paramsToHost();
  session_ = std::make_unique<Session>(transport, model_.info, staging_->hostParams(), options_,
                                       staging_->hostParamsOwner());
  staging_->paramsToDevice();
  // Rank 0's buffers and frozen parameters, as its trained parameters (DDP does the same).
  buffers_.makeEqual(session_->control(), "broadcast", session_->layout().size);
  if (options_.replicas_equal) {
    checkFrozenEqual();
  } else {
    broadcastFrozen();
  }
  for (int l = 0; l < layerCount(); ++l) {
    // SFB layers: autograd must not compute the dense weight gradient at all; the update
    // comes from the factors. Without requires_grad it computes only the input gradient.
    if (usesFactors(session_->plan()[l].scheme)) {
      for (auto& p : model_.params[l]) p.set_requires_grad(false);
    }
  }
  installAppliers();
  if (session_->layout().worker) installHooks();
}

void AutogradSync::installAppliers() {
  appliers_.assign(layerCount(), nullptr);
  bool any = false;
  for (int l = 0; l < layerCount(); ++l) any = any || usesFactors(session_->plan()[l].scheme);
  if (!any) return;
  // POSEIDON_SFB_UPDATE=host keeps a mirrored model's SFB steps on the host mirrors (the
  // session's applier, then the values to the device): how the two are measured.
  const char* where = std::getenv("POSEIDON_SFB_UPDATE");
  const bool on_device = staging_->mirrored() && !(where && std::string(where) == "host");
  int taken = 0;
  for (int l = 0; l < layerCount() && on_device; ++l) {
    if (!usesFactors(session_->plan()[l].scheme)) continue;
    auto applier = std::make_unique<DeviceFactorApplier>(model_.params[l]);
    DeviceFactorApplier* raw = applier.get();
    std::unique_ptr<FactorApplier> given = std::move(applier);
    if (!session_->setFactorApplier(l, given)) continue;
    appliers_[l] = raw;
    ++taken;
  }
  // The device's kind, not its index: ranks of a host train on different GPUs of one kind.
  agreeOnApplier(!session_->layout().worker ? "" : taken > 0 ? c10::DeviceTypeName(device().type(), true) : "host");
}

void AutogradSync::agreeOnApplier(const std::string& mine) {
  // Replicas stay equal only if every worker rounds the same way: the same applier kind.
  const auto all = session_->control().allgather(mine, "where SFB layers are applied");
  std::string first;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;  // a server-only rank applies nothing
    if (first.empty()) first = all[r];
    if (all[r] != first) {
      throw InputError(detail::cat("rank ", r, " applies SFB layers on ", all[r], ", another rank on ", first,
                                   ": replicas would round apart; put every rank's model on the same kind of device, "
                                   "or set POSEIDON_SFB_UPDATE=host on every rank"));
    }
  }
}

void AutogradSync::waitUpdates() {
  for (auto* a : appliers_) {
    if (a) a->waitUpdated();
  }
}

void AutogradSync::checkFrozenEqual() {
  Digest d;
  for (auto& f : model_.frozen) {
    const auto host = f.tensor.detach().to(torch::kCPU).contiguous();
    d.update(host.data_ptr(), host.nbytes());
  }
  checkEqualEverywhere(session_->control(), d.hex(), "frozen parameters");
}

void AutogradSync::broadcastFrozen() {
  torch::NoGradGuard no_grad;
  for (auto& f : model_.frozen) {
    auto t = f.tensor.detach();
    POSEIDON_ENFORCE(t.scalar_type() == torch::kFloat && t.is_contiguous(), "frozen parameter ", f.name,
                     " is not contiguous float32");
    auto host = t.device().is_cpu() ? t : t.to(torch::kCPU);
    session_->control().broadcastFloats(host.data_ptr<float>(), static_cast<std::size_t>(host.numel()), 0,
                                        "frozen parameter " + f.name);
    if (!t.device().is_cpu()) t.copy_(host);
  }
}

AutogradSync::~AutogradSync() {
  // A graph that outlives the model keeps the accumulators: no hook may call into us then.
  for (auto& [acc, key] : hooks_) acc->del_post_hook(key);
  if (!session_) return;
  // No staged callback may reach the session while it goes.
  try {
    staging_->drain();
  } catch (...) {  // the failure was the training loop's to report
  }
  std::vector<bool> factors(layerCount());
  for (int l = 0; l < layerCount(); ++l) factors[l] = usesFactors(session_->plan()[l].scheme);
  // First the session: it waits for syncs in flight, which use held_grads_.
  session_.reset();
  // The tensors outlive us: SFB weights train by autograd again (a new model sees them).
  for (int l = 0; l < layerCount(); ++l) {
    if (!factors[l]) continue;
    for (auto& p : model_.params[l]) p.set_requires_grad(true);
  }
}

void AutogradSync::finish() {
  try {
    staging_->drain();
  } catch (...) {  // the training loop reports its own failure; the session still closes
  }
  session_->finish();
}

void AutogradSync::abortForward() {
  // The forward did not finish (an exception): it is not a pass to count.
  if (training_ && forwards_ > 0) --forwards_;
  training_ = false;
}

void AutogradSync::beginForward(bool training, bool per_layer, bool no_sync) {
  if (training) {
    if (forwards_ == options_.backward_passes_per_step) {
      throw Error(detail::cat("a training forward pass after ", forwards_,
                              " backward passes without step(); call step() once per ", forwards_,
                              " (Options::backward_passes_per_step)"));
    }
  }
  // The buffers are made equal where DDP's broadcast_buffers makes them: before a forward
  // (training or evaluating) that follows one run with gradients on and outside no_sync().
  if (buffers_due_) buffers_.makeEqual(session_->control(), options_.buffers, session_->layout().size);
  buffers_due_ = torch::GradMode::is_enabled() && !no_sync;
  for (int l = 0; l < layerCount() && !per_layer; ++l) {
    if (!self_waited_[l]) waitLayer(l);
  }
  training_ = training;
  if (training) ++forwards_;
  backward_mark_ = std::chrono::steady_clock::now();
}

void AutogradSync::endForward() { backward_mark_ = std::chrono::steady_clock::now(); }

void AutogradSync::waitLayer(int layer) {
  session_->waitLayer(layer);
  if (appliers_[layer]) appliers_[layer]->waitUpdated();
  if (!stale_[layer]) return;
  staging_->valuesIn(layer);
  stale_[layer] = false;
}

void AutogradSync::step() {
  if (!session_->layout().worker) throw Error("step() on a rank that does not train");
  if (forwards_ != options_.backward_passes_per_step) {
    throw Error(detail::cat("step() after ", forwards_, " training forward pass", forwards_ == 1 ? "" : "es",
                            "; Options::backward_passes_per_step is ", options_.backward_passes_per_step));
  }
  staging_->drain();  // every gradient handed over by the hooks has reached the session
  const std::vector<bool> unused = unusedByAll();
  reportRemaining();
  staging_->drain();  // and the layers reported just now (on a GPU, queued for the staging thread)
  // A device-applied SFB layer whose input needs no gradient had no release hook: its
  // weight is free once the backward pass queued so far has run.
  for (int l = 0; l < layerCount(); ++l) {
    if (appliers_[l] && !released_[l]) appliers_[l]->released();
  }
  session_->endIteration();
  resetStep();
  if (!options_.gradient_mode) {
    releaseGradients();
    // What a read of the parameters after optimizer.step() sees is the trained values
    // (the DDP/Horovod contract), unless the overlap was asked for, or SSP (staleness),
    // whose point is that a worker goes on with values up to `staleness` iterations old.
    if (!options_.overlap_step && options_.staleness == 0) waitParameters();
    return;
  }
  // Gradient mode: the user's optimizer steps next and needs every mean gradient.
  session_->waitAll();
  for (int l = 0; l < layerCount() && staging_->mirrored(); ++l) {
    if (appliers_[l]) {
      appliers_[l]->waitUpdated();  // it wrote .grad on the device
    } else {
      staging_->gradientsIn(l, gradientsOf(l));
    }
  }
  // A layer no rank used keeps .grad None, as under DDP: the optimizer skips it.
  for (int l = 0; l < layerCount(); ++l) {
    if (!unused[l]) continue;
    for (auto& p : model_.params[l]) p.mutable_grad().reset();
  }
}

std::vector<bool> AutogradSync::unusedByAll() {
  // Used this step: a gradient from autograd in any pass, an SFB layer's factors from an
  // output that reached the loss (reportFactors marks the reported ones), or in
  // gradient mode a .grad the loop kept (zero_grad(set_to_none=False)), which DDP's
  // optimizer steps too. (In server mode .grad is Poseidon's: on a GPU it stays allocated.)
  std::vector<bool> used(layerCount());
  for (int l = 0; l < layerCount(); ++l) {
    used[l] = touched_[l] || std::any_of(factors_[l].begin(), factors_[l].end(),
                                         [](const FactorEntry& e) { return e.U.defined(); });
    for (const auto& p : model_.params[l]) used[l] = used[l] || (options_.gradient_mode && p.grad().defined());
  }
  session_->recordUse(used);
  if (std::find(used.begin(), used.end(), false) == used.end()) return std::vector<bool>(used.size(), false);
  std::vector<bool> unused = session_->unusedByAll();
  if (!options_.gradient_mode) refuseUnstepped(unused);
  session_->skipUnused(unused);
  return unused;
}

void AutogradSync::refuseUnstepped(const std::vector<bool>& unused) const {
  for (int l = 0; l < layerCount(); ++l) {
    if (!unused[l] || session_->plan()[l].scheme != Scheme::kFactorPush) continue;
    // The shards rebuild the gradient from factors: no rows is a zero gradient to them.
    if (options_.momentum == 0.0f && options_.weight_decay == 0.0f) continue;
    throw InputError(detail::cat("layer '", model_.info.layers[l].name, "' was used by no rank in iteration ",
                                 session_->iteration(), ": DDP leaves its .grad None and the optimizer skips it, "
                                 "but the shards that rebuild its gradient from factors would step it with zeros "
                                 "(momentum and weight decay move it); use another scheme for it"));
  }
}

void AutogradSync::releaseGradients() {
  // A mirrored model (on a GPU, or POSEIDON_MIRROR_ON_CPU) keeps its device .grad: the
  // staging copies it out and zeroes it on the copy stream.
  if (staging_->mirrored()) return;
  for (int l = 0; l < layerCount(); ++l) {
    if (usesFactors(session_->plan()[l].scheme)) continue;  // no .grad: the factors went
    for (auto& p : model_.params[l]) p.mutable_grad().reset();
  }
}

void AutogradSync::waitParameters() {
  session_->waitAll();
  for (int l = 0; l < layerCount(); ++l) waitLayer(l);
}

void AutogradSync::synchronize() {
  waitParameters();
  // Gradient mode: the user's optimizer moved the device values; the host mirrors (what
  // replicaDigest and --verify read) follow. The core never writes them in this mode.
  if (options_.gradient_mode) staging_->paramsToHost();
  buffers_.makeEqual(session_->control(), options_.buffers, session_->layout().size);
}

std::vector<StateRecord> AutogradSync::stateRecords() {
  // Server mode: the host buffers hold the newest values, but for layers applied on the
  // device; gradient mode: the device does.
  waitUpdates();
  if (options_.gradient_mode) staging_->paramsToHost();
  for (int l = 0; l < layerCount() && !options_.gradient_mode; ++l) {
    if (appliers_[l]) staging_->layerToHost(l);
  }
  buffers_.toHost();
  auto records = session_->stateRecords();
  buffers_.addStateRecords(records);
  return records;
}

void AutogradSync::stateRestored() {
  staging_->paramsToDevice();
  for (auto* a : appliers_) {
    if (a) a->momentumRestored();
  }
  stale_.assign(stale_.size(), false);
  buffers_.toDevice();
}

void AutogradSync::seedMomentum(const std::vector<std::vector<torch::Tensor>>& momentum) {
  POSEIDON_ENFORCE_EQ(momentum.size(), model_.params.size(), "layers given momentum");
  auto records = stateRecords();
  for (auto& r : records) {
    const ParamSlice& of = r.momentum_of;
    if (of.layer < 0) continue;
    const torch::Tensor& param = model_.params.at(of.layer).at(of.tensor);
    const torch::Tensor& given = momentum.at(of.layer).at(of.tensor);
    if (!given.defined() || given.numel() != param.numel()) {
      throw InputError(detail::cat("no momentum of the size of ", model_.info.layers[of.layer].name, "'s tensor ",
                                   of.tensor, " to start the servers from"));
    }
    const auto host = given.detach().to(torch::kCPU, torch::kFloat).contiguous();
    POSEIDON_ENFORCE(of.offset * static_cast<std::int64_t>(sizeof(float)) + static_cast<std::int64_t>(r.bytes) <=
                         static_cast<std::int64_t>(host.nbytes()),
                     "momentum record ", r.name, " lies inside its tensor");
    std::memcpy(r.data, host.data_ptr<float>() + of.offset, r.bytes);
  }
  stateRestored();
  session_->momentumSeeded();
}

std::vector<std::vector<torch::Tensor>> AutogradSync::gatherMomentum() {
  stateRecords();  // the replicated layers' host records current (a GPU's copied out)
  std::vector<std::vector<torch::Tensor>> out;
  std::vector<std::vector<std::vector<bool>>> covered;
  for (const auto& layer : model_.params) {
    out.emplace_back();
    covered.emplace_back();
    for (const auto& p : layer) {
      out.back().push_back(torch::zeros({p.numel()}, torch::kFloat));
      covered.back().emplace_back(static_cast<std::size_t>(p.numel()), false);
    }
  }
  for (const auto& piece : session_->gatherMomentum()) {
    const ParamSlice& of = piece.of;
    const auto n = static_cast<std::int64_t>(piece.values.size());
    if (of.layer >= layerCount() || of.tensor >= static_cast<int>(out[of.layer].size()) ||
        of.offset + n > out[of.layer][of.tensor].numel()) {
      throw CommError(detail::cat("a momentum piece of layer ", of.layer, ", tensor ", of.tensor, " that the model does "
                                  "not have"));
    }
    std::memcpy(out[of.layer][of.tensor].data_ptr<float>() + of.offset, piece.values.data(), n * sizeof(float));
    auto& mask = covered[of.layer][of.tensor];
    std::fill(mask.begin() + of.offset, mask.begin() + of.offset + n, true);
  }
  // Never a state with a hole: each float came from the rank that steps it.
  for (int l = 0; l < layerCount(); ++l) {
    for (std::size_t t = 0; t < out[l].size(); ++t) {
      const auto& mask = covered[l][t];
      if (std::find(mask.begin(), mask.end(), false) != mask.end()) {
        throw Error(detail::cat("the momentum of ", model_.info.layers[l].name, "'s tensor ", t,
                                " came from no rank; the optimizer's state would be incomplete"));
      }
      out[l][t] = out[l][t].view(model_.params[l][t].sizes());
    }
  }
  return out;
}

std::string AutogradSync::digest() {
  waitUpdates();
  Digest d;
  for (const auto& p : model_.all) {
    const auto host = p.device().is_cpu() ? p : p.detach().to(torch::kCPU);
    d.update(host.data_ptr<float>(), host.numel() * sizeof(float));
  }
  buffers_.addToDigest(d);
  return d.hex();
}

}  // namespace poseidon
