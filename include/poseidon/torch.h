// The LibTorch adapter: wraps a torch::nn::Sequential so that it trains data-parallel
// under Poseidon. What a LibTorch user adds to a plain training loop:
//
//   poseidon::Runtime runtime(&argc, &argv);                 // once per process
//   poseidon::TorchModel model(runtime.transport(), net, "mynet", options);
//   for (...) {
//     auto loss = torch::cross_entropy_loss(model.forward(x), y);
//     loss.backward();                                       // syncs start layer by layer
//     model.step();                                          // instead of optimizer.step()
//   }
//   model.finish();
//
// Autograd post-hooks on each parameter's gradient accumulator tell Poseidon the moment a
// layer's gradient exists (wait-free back-propagation); forward() waits, layer by layer,
// only for the parameters that layer needs. The optimizer runs on the parameter servers,
// or, for FC layers that go by sufficient factors, on every worker from the factors that
// forward() captures (the input) and a hook on the layer's output delivers (its gradient).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "poseidon/session.h"

namespace poseidon {

class Transport;

// Describes a Sequential's layers with parameters: Linear is FC (M = out, N = in),
// Conv2d is CONV, anything else with parameters is OTHER.
ModelInfo describeSequential(torch::nn::Sequential& net, const std::string& name);

// LibTorch's default CPU random generator (dropout) as bytes and back, for checkpoints.
std::vector<std::uint8_t> randomState();
void setRandomState(const std::vector<std::uint8_t>& bytes);

class TorchModel {
 public:
  // Rank 0's initial parameters are copied to every rank here.
  TorchModel(Transport& transport, torch::nn::Sequential net, const std::string& name, const Options& options);
  ~TorchModel();
  TorchModel(const TorchModel&) = delete;
  TorchModel& operator=(const TorchModel&) = delete;

  // Runs the net; before each layer with parameters, waits for that layer's sync.
  torch::Tensor forward(torch::Tensor x);
  // Ends the iteration after loss.backward(); without WFBP the syncs start here.
  void step();
  // Waits until every layer holds the latest parameters.
  void synchronize();
  void finish();

  Session& session() { return *session_; }
  torch::nn::Sequential& net() { return net_; }
  const ModelInfo& info() const { return info_; }

 private:
  torch::Tensor forwardWithFactors(torch::nn::AnyModule& m, int layer, torch::Tensor x);
  // Timeline: layer l's gradient exists; its backward span ends here.
  void markBackward(int layer);
  struct Hooks;
  torch::nn::Sequential net_;
  ModelInfo info_;
  std::vector<int> layer_of_child_;  // Sequential child -> layer index, or -1
  std::vector<std::vector<torch::Tensor>> layer_params_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Hooks> hooks_;
  std::chrono::steady_clock::time_point backward_mark_;  // end of the last backward span
};

}  // namespace poseidon
