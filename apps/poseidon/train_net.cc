#include "train_net.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/digest.h"
#include "poseidon/errors.h"
#include "torch/buffers.h"
#include "torch/model_builder.h"
#include "torch/resnet.h"

namespace poseidon::app {

namespace {

// Adam's usual rate; the Sequential models carry their SGD rate in their description
// (`lr X`, models/model_spec.cc).
constexpr double kAdamLr = 1e-3;

// Built-in models that are modules with their own forward, not ModelSpecs: their
// recommended rates live here. resnet, one epoch on 4 workers x batch 32, linear decay:
// Adam 0.005 gives 89.4% (0.01: 89.7%; 0.001 with one block per stage: 83%); SGD 0.1 on
// the servers gives 88.6% (0.05: 88.1%).
constexpr int kResnetBlocksPerStage = 2;  // one block: 88% at best, in half the time
NetChoice resnetChoice() { return NetChoice{"resnet", 1, 28, 28, 10, std::nullopt, 0.1, 0.005}; }

NetChoice sequentialChoice(ModelSpec spec) {
  NetChoice c{spec.name, spec.channels, spec.height, spec.width, spec.classes, std::nullopt, spec.lr, kAdamLr};
  c.spec = std::move(spec);
  return c;
}

}  // namespace

NetChoice chooseNet(const TrainOptions& o) {
  if (!o.model_file.empty()) return sequentialChoice(parseModelFile(o.model_file));
  if (o.model == "resnet") return resnetChoice();
  try {
    return sequentialChoice(builtinModel(o.model));
  } catch (const InputError&) {
    std::string known;
    for (const auto& n : builtinModelNames()) known += n + ", ";
    throw InputError("unknown model '" + o.model + "': use one of " + known + "resnet, or --model-file FILE");
  }
}

TrainNet::TrainNet(const NetChoice& choice) : name_(choice.name) {
  if (choice.spec) {
    sequential_ = buildSequential(*choice.spec);
    module_ = sequential_.ptr();
    run_ = [net = sequential_](const torch::Tensor& x) mutable { return net->forward(x); };
    return;
  }
  ResNet resnet(ResNetOptions{choice.channels, choice.classes, kResnetBlocksPerStage});
  module_ = resnet.ptr();
  run_ = [resnet](const torch::Tensor& x) mutable { return resnet->forward(x); };
}

void TrainNet::toDevice(const std::string& choice) {
  const bool gpu = torch::cuda::is_available();
  if (choice == "cpu" || (choice == "auto" && !gpu)) return;
  if (!gpu) {
    throw InputError(
        "--device cuda: this PyTorch sees no CUDA GPU (a CPU-only build, no driver, or "
        "CUDA_VISIBLE_DEVICES empty); use --device cpu or auto");
  }
  // Ranks of one host take the visible GPUs in turn by local rank (several may share one).
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int index = (local ? std::atoi(local) : 0) % static_cast<int>(torch::cuda::device_count());
  device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  // This thread's current device too: work that names no device (cuDNN's and cuBLAS's
  // handles, a new context) goes to this rank's GPU, not to GPU 0.
  c10::impl::getDeviceGuardImpl(device_.type())->setDevice(device_);
  module_->to(device_);
}

std::vector<torch::Tensor> TrainNet::trainableParameters() {
  std::vector<torch::Tensor> params;
  for (const auto& p : module_->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

ModelInfo TrainNet::describe() {
  return sequential_ ? describeSequential(sequential_, name_) : describeModule(*module_, name_);
}

std::unique_ptr<TorchModel> TrainNet::connect(Transport& transport, const Options& options,
                                              const torch::Tensor& example) {
  if (sequential_) return std::make_unique<TorchModel>(transport, sequential_, name_, options);
  // The probe shows Poseidon which Linear layers the forward runs through poseidon::linear
  // and with how many rows (it leaves buffers and the random generator as they were).
  auto probe = [this, example] { run_(example); };
  return std::make_unique<TorchModel>(transport, module_, name_, options, probe);
}

torch::Tensor TrainNet::forward(const torch::Tensor& x, TorchModel* model) {
  if (!model) return run_(x);
  if (sequential_) return model->forward(x);
  return model->forward([&] { return run_(x); });
}

std::string TrainNet::digest() {
  Digest d;
  for (const auto& p : module_->parameters()) {
    const auto host = p.detach().to(torch::kCPU);
    d.update(host.data_ptr<float>(), host.numel() * sizeof(float));
  }
  ModelBuffers(namedBuffers(*module_)).addToDigest(d);
  return d.hex();
}

void TrainNet::saveParameters(const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError("cannot write --save-params file " + tmp);
    for (const auto& p : module_->parameters()) {
      const auto host = p.detach().to(torch::kCPU);
      out.write(reinterpret_cast<const char*>(host.data_ptr<float>()), host.numel() * sizeof(float));
    }
    if (!out.flush()) throw InputError("cannot write --save-params file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError("cannot rename " + tmp + " to " + path);
}

}  // namespace poseidon::app
