// TorchModel's insides: the module tree as layers (module_layers.h), the probe's findings,
// and the autograd core that does the work (autograd_sync.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "poseidon/torch.h"
#include "torch/autograd_sync.h"
#include "torch/module_layers.h"

namespace poseidon {

struct TorchModel::Impl {
  ModuleLayers layers;
  std::unique_ptr<AutogradSync> sync;  // made once the probe has run
  bool probing = false;
  std::int64_t probe_batch = 0;
  std::vector<std::int64_t> probe_rows;  // by layer: factor rows the probe saw; 0 if none
  std::vector<bool> self_waited;         // by layer: waited for inside the forward (probe)

  int layerCount() const { return static_cast<int>(layers.layers.size()); }
  // Runs a Linear layer: records its factor rows in the probe, captures factors when it
  // goes by SFB in a training forward.
  torch::Tensor runLinear(torch::nn::Module& fc, int layer, const torch::Tensor& x);
};

}  // namespace poseidon
