#include "train_step.h"

#include "poseidon/errors.h"

namespace poseidon::app {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const std::string& kind, std::vector<torch::Tensor> params,
                                                       const Options& o) {
  const double lr = o.lr, wd = o.weight_decay;
  if (kind == "adam")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr).weight_decay(wd));
  if (kind == "adamw") {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(lr).weight_decay(wd));
  }
  if (kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(params,
                                               torch::optim::SGDOptions(lr).momentum(o.momentum).weight_decay(wd));
  }
  throw InputError("--optimizer " + kind + ": use one of sgd, adam, adamw");
}

TrainStep::TrainStep(TrainNet& net, TorchModel* model, torch::optim::Optimizer* optimizer, const Options& o)
    : net_(net),
      model_(model),
      optimizer_(optimizer),
      passes_(o.backward_passes_per_step),
      schedule_{o.lr, o.momentum, o.weight_decay, o.lr_decay_iterations} {}

torch::Tensor TrainStep::run(std::int64_t it, const torch::Tensor& x, const torch::Tensor& y) {
  if (!model_) optimizer_->zero_grad();
  auto loss = forwardBackward(x, y);
  if (model_) model_->step();  // in gradient mode, returns once every .grad holds the mean
  if (optimizer_) stepLocally(it);
  return loss;
}

torch::Tensor TrainStep::forwardBackward(const torch::Tensor& x, const torch::Tensor& y) {
  // Each micro-batch's loss divided by the passes, as Horovod's and PyTorch's examples
  // accumulate (the passes' gradients are summed): one step on the whole batch's mean.
  // Kept on the model's device: reading it (item) would wait for the device after every pass.
  const auto xs = x.chunk(passes_), ys = y.chunk(passes_);
  torch::Tensor sum;
  for (int p = 0; p < passes_; ++p) {
    auto loss = torch::nn::functional::cross_entropy(net_.forward(xs[p], model_), ys[p]);
    (passes_ > 1 ? loss / passes_ : loss).backward();
    sum = p == 0 ? loss.detach() : sum + loss.detach();
  }
  return sum / passes_;
}

void TrainStep::stepLocally(std::int64_t it) {
  // The same schedule the servers apply, computed the same way.
  const double lr = static_cast<double>(schedule_.at(static_cast<std::uint64_t>(it)).lr);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  optimizer_->step();
  if (model_) optimizer_->zero_grad();
}

}  // namespace poseidon::app
