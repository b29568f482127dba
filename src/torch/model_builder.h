// Turns an engine-free ModelSpec into a torch::nn::Sequential.
#pragma once

#include <torch/torch.h>

#include "models/model_spec.h"

namespace poseidon {

torch::nn::Sequential buildSequential(const ModelSpec& spec);

}  // namespace poseidon
