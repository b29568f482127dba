#include "torch/resnet.h"

#include "poseidon/torch.h"  // poseidon::linear

namespace poseidon {

namespace {

torch::nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
  // No bias: the BatchNorm that follows every convolution has its own shift.
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride) {
  conv1 = register_module("conv1", conv(in_channels, out_channels, 3, stride));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(out_channels));
  conv2 = register_module("conv2", conv(out_channels, out_channels, 3, 1));
  bn2 = register_module("bn2", torch::nn::BatchNorm2d(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    downsample = register_module("downsample", torch::nn::Sequential(conv(in_channels, out_channels, 1, stride),
                                                                     torch::nn::BatchNorm2d(out_channels)));
  }
}

torch::Tensor BasicBlockImpl::forward(torch::Tensor x) {
  auto out = torch::relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  return torch::relu(out + (downsample ? downsample->forward(x) : x));
}

ResNetImpl::ResNetImpl(const ResNetOptions& o) {
  conv1 = register_module("conv1", conv(o.in_channels, 16, 3, 1));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(16));
  layer1 = stage("layer1", 16, 16, 1, o.blocks_per_stage);
  layer2 = stage("layer2", 16, 32, 2, o.blocks_per_stage);
  layer3 = stage("layer3", 32, 64, 2, o.blocks_per_stage);
  fc = register_module("fc", torch::nn::Linear(64, o.classes));
  // torchvision's initialisation: He (fan-out) for convolutions, BatchNorm as identity.
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* b = m->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(b->weight);
      torch::nn::init::zeros_(b->bias);
    }
  }
}

torch::nn::Sequential ResNetImpl::stage(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t stride,
                                        int blocks) {
  torch::nn::Sequential s;
  for (int b = 0; b < blocks; ++b) s->push_back(BasicBlock(b == 0 ? in : out, out, b == 0 ? stride : 1));
  return register_module(name, s);
}

torch::Tensor ResNetImpl::forward(torch::Tensor x) {
  x = torch::relu(bn1(conv1(x)));
  x = layer3->forward(layer2->forward(layer1->forward(x)));
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  // Through Poseidon, so that the classifier may go by sufficient factors.
  return linear(fc, x);
}

}  // namespace poseidon
