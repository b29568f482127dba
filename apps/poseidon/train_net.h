// The model `poseidon train` trains, whatever its kind: a Sequential made from a ModelSpec
// (fcnet, convnet, mlp, --model-file), which TorchModel runs child by child, or a module
// with its own forward (resnet), which TorchModel runs as a whole. The loop, evaluation,
// checkpoints and the report see only a TrainNet.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "poseidon/options.h"
#include "poseidon/torch.h"
#include "train_options.h"

namespace poseidon::app {

// What --model / --model-file name, before anything is built.
struct NetChoice {
  std::string name;
  std::int64_t channels = 0, height = 0, width = 0;
  int classes = 0;
  std::optional<ModelSpec> spec;  // the Sequential models
  double sgd_lr = 0;              // recommended learning rates
  double adam_lr = 0;

  double recommendedLr(const std::string& optimizer) const { return optimizer == "sgd" ? sgd_lr : adam_lr; }
};

// Throws InputError for an unknown model or a bad model file.
NetChoice chooseNet(const TrainOptions& o);

class TrainNet {
 public:
  // Builds the net from LibTorch's current random state (seed it first).
  explicit TrainNet(const NetChoice& choice);

  const std::string& name() const { return name_; }
  // Moves the net to --device's choice (cpu, cuda, auto); throws InputError for cuda
  // without a GPU. Batches go where device() says.
  void toDevice(const std::string& choice);
  torch::Device device() const { return device_; }
  torch::nn::Module& module() { return *module_; }
  // The parameters an optimizer steps, as they are now: take them before TorchModel
  // exists (it turns off requires_grad of weights that go by sufficient factors).
  std::vector<torch::Tensor> trainableParameters();
  ModelInfo describe();

  // The Poseidon model of this net; `example` is a training batch for the probe.
  std::unique_ptr<TorchModel> connect(Transport& transport, const Options& options, const torch::Tensor& example);
  // A training forward: through `model` when there is one (waits, buffers, factors).
  torch::Tensor forward(const torch::Tensor& x, TorchModel* model);
  // A plain forward, outside Poseidon (evaluation; the baseline).
  torch::Tensor forward(const torch::Tensor& x) { return run_(x); }

  // Parameters and buffers, as TorchModel::digest() computes them.
  std::string digest();
  // The parameters as raw float32, to a new file (written atomically).
  void saveParameters(const std::string& path);

 private:
  std::string name_;
  torch::Device device_{torch::kCPU};
  torch::nn::Sequential sequential_{nullptr};  // set for Sequential models
  std::shared_ptr<torch::nn::Module> module_;  // always set
  std::function<torch::Tensor(const torch::Tensor&)> run_;
};

}  // namespace poseidon::app
