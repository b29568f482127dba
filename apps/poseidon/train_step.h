// One training iteration of one worker, in each of the loop's three modes:
//  - Poseidon, server-side SGD: forward and backward of each micro-batch, model.step();
//  - Poseidon, gradient mode: the same, then the local optimizer steps on the mean
//    gradient model.step() left in every .grad, and the gradients are zeroed;
//  - --baseline: a plain LibTorch loop; the local optimizer steps on the accumulated
//    gradient divided by the micro-batches, as Poseidon divides it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/options.h"
#include "poseidon/torch.h"
#include "update/sgd.h"
#include "train_net.h"

namespace poseidon::app {

// The torch::optim optimizer that steps on a worker: "sgd" (momentum and weight decay as
// the servers apply them), "adam" or "adamw" (default betas and eps), at `options.lr`.
std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const std::string& kind, std::vector<torch::Tensor> params,
                                                       const Options& options);

class TrainStep {
 public:
  // `model`: null for the baseline; `optimizer`: null for server-side SGD.
  TrainStep(TrainNet& net, TorchModel* model, torch::optim::Optimizer* optimizer, const Options& options);

  // Trains on one batch as iteration `it`; returns the mean loss of its micro-batches.
  torch::Tensor run(std::int64_t it, const torch::Tensor& x, const torch::Tensor& y);

 private:
  torch::Tensor forwardBackward(const torch::Tensor& x, const torch::Tensor& y);
  void stepLocally(std::int64_t it);

  TrainNet& net_;
  TorchModel* model_;
  torch::optim::Optimizer* optimizer_;
  const int passes_;
  // Every group's learning rate follows the schedule the servers apply (SgdOptions::at).
  const SgdOptions schedule_;
};

}  // namespace poseidon::app
