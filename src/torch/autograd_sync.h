// The adapter's core, shared by the C++ TorchModel and the Python package: a model as
// layers of torch tensors (whoever found them: the C++ module walker or Python's
// named_modules), driven by autograd. It owns the session and
//  - starts each layer's sync from post-hooks on its gradient accumulators (WFBP),
//  - captures the sufficient factors of SFB layers (factor_capture.cc),
//  - keeps buffers equal, counts backward passes, reports unused layers as zeros
//    (grad_hooks.cc), and ends iterations (autograd_sync.cc).
// It knows nothing of modules: the caller says when a forward begins and ends, which
// layers it waits for itself, and hands over each SFB layer's input and output.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "poseidon/session.h"
#include "poseidon/state_record.h"
#include "torch/buffers.h"
#include "torch/device_applier.h"
#include "torch/device_staging.h"

namespace poseidon {

class Transport;

// A model as tensors: info.layers[l] describes params[l] (trainable, in its tensor order).
struct ModelTensors {
  ModelInfo info;
  std::vector<std::vector<torch::Tensor>> params;
  std::vector<NamedTensor> buffers;  // kept equal across ranks, checkpointed
  std::vector<NamedTensor> frozen;   // not trained: rank 0's values at start-up
  std::vector<torch::Tensor> all;    // every parameter, trained or not, for digest()
  // Host mirrors and staged copies even for a CPU model (tests of the GPU path's bookkeeping).
  bool mirror_on_cpu = false;
};

// One call of an SFB layer in a backward pass of this step: V at its forward, U when
// autograd reaches its output; `version` is V's version counter at the forward.
struct FactorEntry {
  torch::Tensor U, V;
  std::int64_t version = 0;
};

class AutogradSync {
 public:
  AutogradSync(ModelTensors model, const Options& options);
  ~AutogradSync();
  AutogradSync(const AutogradSync&) = delete;
  AutogradSync& operator=(const AutogradSync&) = delete;

  // Before start(): layers the caller's forward waits for itself (waitLayer), not up front.
  void setSelfWaited(int layer) { self_waited_[layer] = true; }
  // Makes the session (all ranks together): broadcasts rank 0's parameters, buffers and
  // frozen tensors; SFB weights stop computing dense gradients; hooks go on.
  void start(Transport& transport);

  // A forward pass: `training` if gradients are on and the model is in training mode.
  // Waits for every layer not self-waited (unless `per_layer`: the caller waits for all).
  // `no_sync`: a pass inside DDP's no_sync() (it only accumulates). An SFB layer's factor
  // rows may differ by rank and by pass (sequence lengths, batch sizes): each rank sends its own.
  void beginForward(bool training, bool per_layer, bool no_sync);
  void endForward();
  // Instead of endForward() when the forward threw: it does not count as a pass.
  void abortForward();
  // Layer l holds this iteration's values (on a GPU: the compute stream waits for their copy).
  void waitLayer(int layer);
  // An SFB layer's forward ran: x its input, y its output. Returns the tensor the caller
  // must use as the output (y, or y made to carry a gradient).
  torch::Tensor captureFactors(int layer, const torch::Tensor& x, torch::Tensor y);
  bool factorsWanted(int layer) const {
    return training_ && torch::GradMode::is_enabled() && usesFactors(session_->plan()[layer].scheme);
  }

  // Ends the iteration after the last backward pass (TorchModel::step); in server mode
  // waits for the new parameters unless Options::overlap_step.
  void step();
  // Every layer holds its newest values (on a GPU, the compute stream has their copies).
  void waitParameters();
  // waitParameters(), the host mirrors of a gradient-mode model, and equal buffers.
  void synchronize();
  // Ends the session; staged calls still queued reach it first (an error path may close
  // after a backward without step()).
  void finish();
  // This rank is failing: the session ends without waiting for the other ranks.
  void abandon(const std::string& why) { session_->abandon(why); }
  // Views of host memory holding the whole state (copied from the device first); after a
  // restore wrote into them, stateRestored() puts the values back on the device.
  std::vector<StateRecord> stateRecords();
  void stateRestored();
  // Server mode, before the first step: the SGD momentum the workers' own optimizer built,
  // one tensor per layer and parameter tensor (as the model lists them), becomes the
  // servers' and replicas' (each takes its slice). How mode "auto" continues on the servers
  // after a first iteration stepped on the workers.
  void seedMomentum(const std::vector<std::vector<torch::Tensor>>& momentum);
  // Server mode, between iterations, on this rank alone: every parameter's SGD momentum
  // (float32, on the CPU, shaped as the parameter), from the ranks that hold it
  // (Session::gatherMomentum). Throws rather than return a tensor with a part missing.
  std::vector<std::vector<torch::Tensor>> gatherMomentum();
  std::string digest();

  Session& session() { return *session_; }
  const ModelInfo& info() const { return model_.info; }
  torch::Device device() const { return staging_->device(); }
  int layerCount() const { return static_cast<int>(model_.params.size()); }

 private:
  friend struct PostHook;
  // grad_hooks.cc
  void installHooks();
  void resetStep();
  void tensorDone(int layer);
  void reportGradients(int layer);
  void reportRemaining();
  void markBackward(int layer);
  // factor_capture.cc
  void reportFactors(int layer);

  // autograd_sync.cc: SFB layers of a mirrored model step where their weight lives.
  void installAppliers();
  // Server mode on host tensors, at step(): .grad goes (held_grads_ keeps what a sync still
  // reads), so that the next backward's AccumulateGrad takes autograd's gradient as .grad,
  // as after DDP's zero_grad(set_to_none=True), instead of adding it into the zeroed one:
  // autograd's add pass over every gradient goes (the syncs still zero the tensors they
  // took). Server mode's .grad is never the mean a loop could read (_GradReads refuses the
  // read); after step() it is undefined.
  void releaseGradients();
  void agreeOnApplier(const std::string& mine);
  void waitUpdates();

  bool lastPass() const { return forwards_ == options_.backward_passes_per_step; }
  // At step(): which layers no rank used in this step (DDP's find_unused_parameters rule),
  // asked of the other ranks only where this rank did not use some; their steps skip them.
  std::vector<bool> unusedByAll();
  // Server mode: a layer whose factors the shards rebuild (the 2015 factor push) cannot be
  // skipped by them: InputError where its zero-gradient step would move it.
  void refuseUnstepped(const std::vector<bool>& unused) const;
  std::vector<torch::Tensor> gradientsOf(int layer);  // defined: zeros where autograd gave none
  void broadcastFrozen();
  void checkFrozenEqual();  // Options::replicas_equal: the digests instead

  ModelTensors model_;
  const Options options_;
  ModelBuffers buffers_;
  std::unique_ptr<DeviceStaging> staging_;  // before the session, which reads its host buffers
  std::unique_ptr<Session> session_;
  std::vector<bool> self_waited_;
  // Mirrored models, server mode: layers whose device values are older than the host's.
  std::vector<bool> stale_;
  // SFB layers applied on the model's device (owned by the session), by layer; else null.
  std::vector<DeviceFactorApplier*> appliers_;
  bool training_ = false;           // the current (or last) forward trains

  // The accumulators our hooks sit on (kept alive: a variable holds its accumulator weakly)
  // and the hooks' keys, to take them off when the model goes.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::uintptr_t>> hooks_;
  std::vector<int> pending_;                       // tensors of the layer without gradient in the last pass
  std::vector<bool> reported_;                     // layers whose sync has been handed over this step
  std::vector<bool> touched_;                      // layers used in some pass of this step (a gradient, reported factors)
  int forwards_ = 0;                               // training forward passes since the last step()
  bool buffers_due_ = true;  // the next forward makes the buffers equal first (DDP's rule)
  std::vector<std::vector<FactorEntry>> factors_;  // SFB layers: this step's calls
  std::vector<int> unreleased_;                    // SFB layers: input hooks of the last pass still to fire
  std::vector<bool> released_;                     // SFB layers: the weight's last use this step has passed
  // The gradient tensors a sync reads or writes: alive even if the user drops .grad.
  std::vector<std::vector<torch::Tensor>> held_grads_;
  std::chrono::steady_clock::time_point backward_mark_;
};

}  // namespace poseidon
