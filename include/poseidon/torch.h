// The LibTorch adapter: makes any torch::nn::Module train data-parallel under Poseidon.
// What a LibTorch user adds to a plain training loop:
//
//   poseidon::Runtime runtime(&argc, &argv);                      // once per process
//   poseidon::TorchModel model(runtime.transport(), net, "mynet", options);
//   for (...) {
//     auto loss = torch::cross_entropy_loss(model.forward(x), y);  // a Sequential
//     // any module: model.forward([&] { return net->forward(x); })
//     loss.backward();                                            // syncs start layer by layer
//     model.step();                                               // instead of optimizer.step()
//   }
//   model.finish();
//
// A *layer* is a module that owns trainable parameters directly, named by its path in the
// module tree (`layer2.0.conv1`); Linear is FC, Conv1d/2d/3d CONV, anything else OTHER.
// Autograd post-hooks on each parameter's gradient accumulator tell Poseidon the moment a
// layer's gradient exists (wait-free back-propagation), in whatever order autograd produces
// them. Frozen parameters (requires_grad false) are left out.
//
// Where the optimizer runs (Options::gradient_mode):
//  - server-side SGD (default): the parameter servers, SFB replicas and allreduce replicas
//    apply SGD with momentum; step() ends the iteration; the next forward waits per layer.
//  - gradient mode: every scheme delivers the workers' mean gradient into each parameter's
//    .grad; step() waits until all are there, and the user's own torch::optim optimizer
//    then steps, identically on every rank (Adam, clipping, per-group settings all work):
//      loss.backward(); model.step(); optimizer.step(); optimizer.zero_grad();
//
// Sufficient factors (SFB) need the Linear's input and the gradient at its output. LibTorch
// has no module forward hooks, so Poseidon captures them where it runs the Linear itself:
// the Linear children of a Sequential that model.forward(x) runs, and, inside a custom
// forward, a Linear called as `poseidon::linear(fc, x)` (seen by the probe, see below). Any
// other Linear goes by PS or allreduce, never by SFB. An input [d0, ..., dk, N] gives
// d0*...*dk factor rows. A Linear that went through poseidon::linear() in the probe must
// always be called that way: a direct call of an SFB layer adds nothing to its factors (its
// weight has requires_grad false). A Sequential always runs with forward(x).
//
// The probe (optional): a function that runs the model's forward once on an example batch
// of the training batch size. The constructor runs it without gradients and learns which
// Linear layers go through poseidon::linear(), how many factor rows each example makes
// (a token model's Linear on [B, T, E] makes T), and which layers a custom forward waits
// for itself (poseidon::waitFor); the cost model uses all three.
//
// Buffers (BatchNorm running statistics) are broadcast from rank 0 at start-up, kept equal
// during training by Options::buffers ("broadcast": rank 0's before every forward, DDP's
// default; "average": the workers' mean before every forward), made equal again by
// synchronize(), and are part of stateRecords() and digest().
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "poseidon/session.h"
#include "poseidon/state_record.h"

namespace poseidon {

class Transport;

// Describes a Sequential's children with parameters: Linear is FC (M = out, N = in),
// Conv2d is CONV, anything else with parameters is OTHER. Names: fc9, conv0, ... (the
// child's position); parameters of nested modules give "<position>.<path>" layers.
ModelInfo describeSequential(torch::nn::Sequential& net, const std::string& name);
// Describes any module: one layer per module with trainable parameters of its own, named
// by its path ("root" for the module itself).
ModelInfo describeModule(torch::nn::Module& module, const std::string& name);

// LibTorch's default random generator of a device (dropout draws from the one of the
// device it runs on) as bytes and back, for checkpoints.
std::vector<std::uint8_t> randomState(torch::Device device = torch::kCPU);
void setRandomState(const std::vector<std::uint8_t>& bytes, torch::Device device = torch::kCPU);

// Inside TorchModel::forward: runs `fc` on `x` through Poseidon (waits for its parameters;
// captures its sufficient factors when it goes by SFB). Elsewhere: fc->forward(x).
torch::Tensor linear(torch::nn::Linear& fc, const torch::Tensor& x);
// Inside TorchModel::forward: waits until every layer in `module` (itself and below) holds
// this iteration's parameters. With a probe that saw these calls, forward() leaves those
// layers to them instead of waiting for everything up front. Elsewhere: nothing.
void waitFor(const torch::nn::Module& module);

class TorchModel {
 public:
  // A Sequential, as before; `example` (optional) is a batch the probe runs.
  TorchModel(Transport& transport, torch::nn::Sequential net, const std::string& name, const Options& options,
             torch::Tensor example = {});
  // Any module (a holder such as MyNet, or a shared_ptr). `probe` (optional) runs the
  // module's forward on an example batch; see the top of this file.
  TorchModel(Transport& transport, std::shared_ptr<torch::nn::Module> module, const std::string& name,
             const Options& options, std::function<void()> probe = {});
  template <class Impl>
  TorchModel(Transport& transport, torch::nn::ModuleHolder<Impl> module, const std::string& name,
             const Options& options, std::function<void()> probe = {})
      : TorchModel(transport, std::static_pointer_cast<torch::nn::Module>(module.ptr()), name, options,
                   std::move(probe)) {}
  ~TorchModel();
  TorchModel(const TorchModel&) = delete;
  TorchModel& operator=(const TorchModel&) = delete;

  // A Sequential: runs it; before each child with parameters, waits for its layers.
  torch::Tensor forward(torch::Tensor x);
  // Any module: `run()` calls the module's own forward and returns whatever it returns.
  // Waits for the parameters first (all layers, or those the probe did not see waited for
  // inside), keeps buffers equal, and lets poseidon::linear/waitFor work inside.
  template <class Run>
  auto forward(Run&& run) -> decltype(run()) {
    ForwardScope scope(*this);
    return run();
  }
  // Ends the iteration after loss.backward() (after the last of
  // Options::backward_passes_per_step passes, whose gradients are summed). Layers that produced no gradient contribute
  // zeros. In gradient mode, returns once every .grad holds the workers' mean gradient.
  void step();
  // Waits until every layer holds the latest parameters and makes the buffers equal.
  void synchronize();
  void finish();

  // Everything a checkpoint of this model needs besides the optimizer's own state: the
  // session's records and the buffers. Valid between iterations, after synchronize().
  // On a GPU the records are host copies: after a restore wrote into them, call
  // stateRestored() to put the values back on the device.
  std::vector<StateRecord> stateRecords();
  void stateRestored();
  // Hex digest of every parameter and buffer (the same on every rank after synchronize()).
  std::string digest();

  Session& session();
  torch::nn::Module& module() { return *module_; }
  // The Sequential this model was built from; throws for other modules.
  torch::nn::Sequential& net();
  const ModelInfo& info() const { return info_; }
  // Where the parameters live (the CPU, or a GPU whose copies Poseidon stages).
  torch::Device device() const;

 private:
  // Sets up one forward pass: waits, buffers, the thread's forward context; undone at exit.
  class ForwardScope {
   public:
    // `per_child`: forward(x) of a Sequential, which waits child by child.
    explicit ForwardScope(TorchModel& model, bool per_child = false);
    ~ForwardScope();
    ForwardScope(const ForwardScope&) = delete;
    ForwardScope& operator=(const ForwardScope&) = delete;

   private:
    TorchModel& model_;
    TorchModel* outer_;
  };
  // Builds the autograd core and its session once the layers are known (after the probe).
  void start(Transport& transport, const Options& options);

 public:
  struct Impl;  // src/torch/model_impl.h

 private:
  friend torch::Tensor linear(torch::nn::Linear& fc, const torch::Tensor& x);
  friend void waitFor(const torch::nn::Module& module);

  torch::nn::Sequential net_{nullptr};
  std::shared_ptr<torch::nn::Module> module_;
  ModelInfo info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace poseidon
