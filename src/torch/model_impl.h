// TorchModel's insides, shared by the files of the adapter: torch_model.cc (construction,
// forward, step), grad_hooks.cc (gradient-accumulator hooks, zero contributions) and
// factor_capture.cc (sufficient factors of SFB layers).
#pragma once

#include <torch/csrc/autograd/function.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "poseidon/torch.h"
#include "torch/buffers.h"
#include "torch/module_layers.h"

namespace poseidon {

// One call of an SFB layer in a backward pass of this step: V at its forward, U when
// autograd reaches its output; `version` is V's version counter at the forward.
struct FactorEntry {
  torch::Tensor U, V;
  std::int64_t version = 0;
};

struct TorchModel::Impl {
  Impl(TorchModel& owner, ModuleLayers layers, const Options& options)
      : owner(owner), layers(std::move(layers)), options(options), buffers(*owner.module_) {}
  ~Impl();

  TorchModel& owner;
  ModuleLayers layers;
  const Options options;
  ModelBuffers buffers;
  std::vector<bool> self_waited;  // by layer: waited for inside the forward (probe), not up front
  bool probing = false;
  std::int64_t probe_batch = 0;
  std::vector<std::int64_t> probe_rows;  // by layer: factor rows the probe saw; 0 if none

  // The accumulators our hooks sit on (kept alive: a variable holds its accumulator weakly)
  // and the hooks' keys, to take them off when the model goes.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::uintptr_t>> hooks;
  std::vector<int> pending;    // tensors of the layer without gradient in the last pass
  std::vector<bool> reported;  // layers whose sync has been handed over this step
  int forwards = 0;            // training forward passes since the last step()
  std::vector<std::vector<FactorEntry>> factors;  // SFB layers: this step's calls
  std::vector<int> unreleased;  // SFB layers: input hooks of the last pass still to fire
  std::vector<bool> rows_warned;
  std::chrono::steady_clock::time_point backward_mark;

  Session& session() { return *owner.session_; }
  int layerCount() const { return static_cast<int>(layers.layers.size()); }
  bool lastPass() const { return forwards == options.backward_passes_per_step; }
  // A forward that trains: gradients on and the module in training mode.
  bool training() const { return torch::GradMode::is_enabled() && owner.module_->is_training(); }

  // grad_hooks.cc
  void installHooks();
  void resetStep();
  void tensorDone(int layer);
  void reportGradients(int layer);
  void reportRemaining();
  void markBackward(int layer);
  // factor_capture.cc
  torch::Tensor runLinear(torch::nn::Module& fc, int layer, const torch::Tensor& x);
  torch::Tensor forwardWithFactors(torch::nn::Module& fc, int layer, const torch::Tensor& x);
  void warnIfRowsDiffer(int layer, std::int64_t rows, std::int64_t batch);
  void reportFactors(int layer);
};

}  // namespace poseidon
