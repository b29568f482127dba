// A profile of a real run as the simulator's model, for `poseidon simulate` and `plan`:
// its own shape lines, or the layers of the model that made it (older profiles). The live
// model's version and the schedule rule are in src/simulate/profiled_model.
#pragma once

#include <string>

#include "simulate/sim_model.h"

namespace poseidon::app {

// `model` / `model_file` name the model only for a profile without shape lines; throws
// InputError when the profile and the model do not fit.
sim::SimModel profiledModel(const std::string& path, const std::string& model, const std::string& model_file);

}  // namespace poseidon::app
