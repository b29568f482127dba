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
// simulated at `batch` per device on the cluster and rates the session found. With a
// `stack_bytes_per_s` > 0 each simulated iteration is also bounded by the host's CPU: this
// host's cores shared by the nodes mpirun started on it (OMPI_COMM_WORLD_LOCAL_SIZE).
Options::SchedulePlan schedulePlanFrom(const std::string& path, std::int64_t batch, double stack_bytes_per_s);

}  // namespace poseidon::app
