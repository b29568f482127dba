// Sequential network descriptions, independent of any engine: the built-in benchmark
// models and user model files are both parsed into a ModelSpec, which the LibTorch
// adapter turns into a torch::nn::Sequential.
//
// Model file format, one layer per line, '#' starts a comment:
//   input C H W          (required, first)      conv OUT K [stride=S] [pad=P]
//   classes N            (required)             pool K        (max pooling, stride K)
//   relu | flatten | dropout P | fc OUT          the last layer is 'fc N' with N = classes
//   lr X                 (optional) the learning rate this net trains well with
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/model_info.h"

namespace poseidon {

struct LayerSpec {
  enum class Op { kConv, kPool, kRelu, kFlatten, kFC, kDropout };
  Op op = Op::kRelu;
  std::int64_t in = 0;   // input channels (conv) or features (fc), filled in by parsing
  std::int64_t out = 0;  // output channels (conv) or features (fc)
  std::int64_t kernel = 0;
  std::int64_t stride = 1;
  std::int64_t pad = 0;
  double p = 0.0;  // dropout probability
  int line = 0;
};

struct ModelSpec {
  std::string name;
  std::int64_t channels = 0, height = 0, width = 0;
  int classes = 0;
  double lr = 0;  // recommended learning rate; 0 when the description gives none
  std::vector<LayerSpec> layers;
};

// Throws InputError "<source> line N: ..." on anything malformed or inconsistent.
ModelSpec parseModelText(const std::string& text, const std::string& source, const std::string& name);
ModelSpec parseModelFile(const std::string& path);
// fcnet, convnet, mlp; throws InputError listing the known names otherwise.
ModelSpec builtinModel(const std::string& name);
std::vector<std::string> builtinModelNames();
// The coordinator's view of a spec, as the LibTorch adapter derives it from the built net
// (layer names are the kind and the Sequential position: conv0, fc9, ...).
ModelInfo modelInfoFromSpec(const ModelSpec& spec);

}  // namespace poseidon
