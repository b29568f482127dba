#include "torch/autograd_sync.h"

#include "comm/control_channel.h"
#include "common/digest.h"
#include "poseidon/errors.h"

namespace poseidon {

AutogradSync::AutogradSync(ModelTensors model, const Options& options)
    : model_(std::move(model)),
      options_(options),
      buffers_(std::move(model_.buffers)),
      self_waited_(model_.params.size(), false) {
  if (model_.params.empty()) {
    throw InputError("model '" + model_.info.name + "' has no trainable parameters: nothing to train data-parallel");
  }
  POSEIDON_ENFORCE_EQ(model_.params.size(), model_.info.layers.size(), "layers of model ", model_.info.name);
}

void AutogradSync::start(Transport& transport) {
  std::vector<std::vector<float*>> params;
  for (auto& layer : model_.params) {
    std::vector<float*> ptrs;
    for (auto& p : layer) ptrs.push_back(p.data_ptr<float>());
    params.push_back(std::move(ptrs));
  }
  if (!buffers_.empty() && options_.server_ranks > 0) {
    throw InputError("a model with buffers (BatchNorm statistics) keeps them equal with collectives among all ranks: "
                     "drop --server-ranks");
  }
  session_ = std::make_unique<Session>(transport, model_.info, std::move(params), options_);
  // Rank 0's buffers and frozen parameters, as its trained parameters (DDP does the same).
  buffers_.broadcast(session_->control());
  for (auto& f : model_.frozen) {
    auto t = f.tensor.detach();
    POSEIDON_ENFORCE(t.scalar_type() == torch::kFloat && t.is_contiguous(), "frozen parameter ", f.name,
                     " is not contiguous float32");
    session_->control().broadcastFloats(t.data_ptr<float>(), static_cast<std::size_t>(t.numel()), 0,
                                        "frozen parameter " + f.name);
  }
  for (int l = 0; l < layerCount(); ++l) {
    // SFB layers: autograd must not compute the dense weight gradient at all; the update
    // comes from the factors. Without requires_grad it computes only the input gradient.
    if (session_->usesFactors(l)) {
      for (auto& p : model_.params[l]) p.set_requires_grad(false);
    }
  }
  if (session_->isWorker()) installHooks();
}

AutogradSync::~AutogradSync() {
  // A graph that outlives the model keeps the accumulators: no hook may call into us then.
  for (auto& [acc, key] : hooks_) acc->del_post_hook(key);
  if (!session_) return;
  std::vector<bool> factors(layerCount());
  for (int l = 0; l < layerCount(); ++l) factors[l] = session_->usesFactors(l);
  // First the session: it waits for syncs in flight, which use held_grads_.
  session_.reset();
  // The tensors outlive us: SFB weights train by autograd again (a new model sees them).
  for (int l = 0; l < layerCount(); ++l) {
    if (!factors[l]) continue;
    for (auto& p : model_.params[l]) p.set_requires_grad(true);
  }
}

void AutogradSync::abortForward() {
  // The forward did not finish (an exception): it is not a pass to count.
  if (training_ && forwards_ > 0) --forwards_;
  training_ = false;
}

void AutogradSync::beginForward(bool training, bool per_layer, std::int64_t batch) {
  if (training) {
    if (forwards_ == options_.backward_passes_per_step) {
      throw Error(detail::cat("a training forward pass after ", forwards_,
                              " backward passes without step(); call step() once per ", forwards_,
                              " (Options::backward_passes_per_step)"));
    }
    // Every forward starts from equal buffers (DDP's broadcast_buffers).
    buffers_.makeEqual(session_->control(), options_.buffers, session_->size());
  }
  for (int l = 0; l < layerCount() && !per_layer; ++l) {
    if (!self_waited_[l]) session_->waitLayer(l);
  }
  training_ = training;
  forward_batch_ = batch;
  if (training) ++forwards_;
  backward_mark_ = std::chrono::steady_clock::now();
}

void AutogradSync::endForward() { backward_mark_ = std::chrono::steady_clock::now(); }

void AutogradSync::step() {
  if (!session_->isWorker()) throw Error("step() on a rank that does not train");
  if (forwards_ != options_.backward_passes_per_step) {
    throw Error(detail::cat("step() after ", forwards_, " training forward pass", forwards_ == 1 ? "" : "es",
                            "; Options::backward_passes_per_step is ", options_.backward_passes_per_step));
  }
  reportRemaining();
  session_->endIteration();
  resetStep();
  // Gradient mode: the user's optimizer steps next and needs every mean gradient.
  if (options_.gradient_mode) session_->waitAll();
}

void AutogradSync::synchronize() {
  session_->waitAll();
  buffers_.makeEqual(session_->control(), options_.buffers, session_->size());
}

std::vector<StateRecord> AutogradSync::stateRecords() {
  auto records = session_->stateRecords();
  buffers_.addStateRecords(records);
  return records;
}

std::string AutogradSync::digest() {
  Digest d;
  for (const auto& p : model_.all) d.update(p.data_ptr<float>(), p.numel() * sizeof(float));
  buffers_.addToDigest(d);
  return d.hex();
}

}  // namespace poseidon
