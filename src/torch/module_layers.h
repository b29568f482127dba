// The adapter's view of a torch::nn::Module tree as the coordinator's layers: a layer is a
// module that owns trainable parameters directly; frozen parameters are left out. Engine
// side of ModelInfo (poseidon/model_info.h).
#pragma once

#include <torch/torch.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "poseidon/model_info.h"

namespace poseidon {

struct ModuleLayer {
  torch::nn::Module* module = nullptr;  // owns the parameters
  std::string path;                     // in the module tree ("" for the root)
  std::vector<torch::Tensor> params;    // trainable, in registration order
  bool linear = false;                  // a Linear whose weight (and bias) are all it trains
};

struct ModuleLayers {
  std::vector<ModuleLayer> layers;
  ModelInfo info;
  // For a Sequential root: the layers inside each child, in child order.
  std::vector<std::vector<int>> layers_of_child;
  // Every module of the tree -> the layers in its subtree (waitFor).
  std::unordered_map<const torch::nn::Module*, std::vector<int>> layers_under;
  std::unordered_map<const torch::nn::Module*, int> layer_of_module;
};

// `sequential_root`: name layers as describeSequential always has (fc9, conv0, ...: kind and
// child position), and treat the root's Linear children as factorable (the adapter runs them).
// Other Linear layers start as not factorable; the probe may find them capturable.
ModuleLayers discoverLayers(torch::nn::Module& root, const std::string& name, bool sequential_root);

}  // namespace poseidon
