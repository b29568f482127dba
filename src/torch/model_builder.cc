#include "torch/model_builder.h"

namespace poseidon {

torch::nn::Sequential buildSequential(const ModelSpec& spec) {
  torch::nn::Sequential net;
  for (const auto& l : spec.layers) {
    switch (l.op) {
      case LayerSpec::Op::kConv:
        net->push_back(
            torch::nn::Conv2d(torch::nn::Conv2dOptions(l.in, l.out, l.kernel).stride(l.stride).padding(l.pad)));
        break;
      case LayerSpec::Op::kPool:
        net->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(l.kernel).stride(l.stride)));
        break;
      case LayerSpec::Op::kRelu:
        net->push_back(torch::nn::ReLU());
        break;
      case LayerSpec::Op::kFlatten:
        net->push_back(torch::nn::Flatten());
        break;
      case LayerSpec::Op::kFC:
        net->push_back(torch::nn::Linear(l.in, l.out));
        break;
      case LayerSpec::Op::kDropout:
        net->push_back(torch::nn::Dropout(l.p));
        break;
    }
  }
  return net;
}

}  // namespace poseidon
