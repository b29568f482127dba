// A small residual network for 1x28x28 images (Fashion-MNIST), built in as
// `poseidon train --model resnet`: a module with its own forward (residual additions,
// BatchNorm buffers), the kind of model a Sequential cannot express. Shaped like
// torchvision's ResNet so module paths read the same (`layer2.0.conv1`,
// `layer2.0.downsample.0`, `fc`), scaled down: a 3x3 stem, three stages of BasicBlocks
// (16, 32, 64 channels; strides 1, 2, 2), global average pooling, one Linear: 0.17 M
// parameters with two blocks per stage.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace poseidon {

// Two 3x3 convolutions with BatchNorm and a shortcut: the identity, or a 1x1 convolution
// with BatchNorm where the block changes the stride or the channel count.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};  // empty holder for the identity shortcut
};
TORCH_MODULE(BasicBlock);

struct ResNetOptions {
  std::int64_t in_channels = 1;
  std::int64_t classes = 10;
  // BasicBlocks in each of the three stages (two: an epoch on 4 ranks of a 2-core machine
  // takes about a minute and reaches 89% on Fashion-MNIST; one: 88% at best).
  int blocks_per_stage = 2;
};

class ResNetImpl : public torch::nn::Module {
 public:
  explicit ResNetImpl(const ResNetOptions& options = {});
  // Logits [B, classes] of images [B, C, H, W].
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Sequential stage(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t stride,
                              int blocks);

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

}  // namespace poseidon
