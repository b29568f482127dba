// A profile of a real run (`poseidon train --profile-out`, Python's write_profile) as the
// simulator's model: its measured per-layer times on its own shape lines, or on the layers
// of the model that made it (older profiles). Shared by `simulate` and `plan`.
#pragma once

#include <cstdint>
#include <string>

#include "poseidon/options.h"
#include "simulate/sim_model.h"

namespace poseidon::app {

// `model` / `model_file` name the model only for a profile without shape lines; throws
// InputError when the profile and the model do not fit.
sim::SimModel profiledModel(const std::string& path, const std::string& model, const std::string& model_file);

// The schedule rule for a training session: the profile at `path` (with shape lines),
// simulated at `batch` per device on the cluster and rates the session found.
Options::SchedulePlan schedulePlanFrom(const std::string& path, std::int64_t batch);

}  // namespace poseidon::app
