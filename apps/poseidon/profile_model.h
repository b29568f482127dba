// A profile of a real run (`poseidon train --profile-out`, Python's write_profile) as the
// simulator's model, and the schedule rule over it. Shared by `simulate`, `plan` and
// `train --cost-model schedule`.
#pragma once

#include <cstdint>
#include <string>

#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "simulate/schedule_rule.h"
#include "simulate/sim_model.h"

namespace poseidon::app {

// The profile's measured per-layer times on its own shape lines, or on the layers of the
// model that made it (`model` / `model_file`, for older profiles without shape lines).
// Throws InputError when the profile and the model do not fit.
sim::SimModel profiledModel(const std::string& path, const std::string& model, const std::string& model_file);
// The profile's times on a live model's layers; a profile with shape lines must describe
// the same layers (names and sizes).
sim::SimModel profiledModel(const std::string& path, const ModelInfo& live);

// What the schedule rule simulates besides the model.
struct ScheduleCluster {
  int nodes = 1;
  int devices_per_node = 1;
  std::int64_t batch = 32;  // per device; a profile's times scale linearly to it
  double bandwidth_bytes_per_s = 0;
  double gemm_flops_per_s = 0;
  // The host CPU bound (0 cores: not modelled), as `poseidon simulate --host-cores`.
  double host_cores = 0;
  int nodes_per_host = 1;
  double stack_bytes_per_s = 0;
};
// Iterations each plan is simulated for: one to warm up, three measured.
constexpr int kScheduleIterations = 4;
sim::ScheduleChoice scheduleOf(const sim::SimModel& model, const ScheduleCluster& cluster);

// The schedule rule for a training session (Options::schedule_plan): the profile at `path`
// on the session's model, at `batch` per device, on the cluster and rates the session
// found. With `stack_bytes_per_s` > 0 each simulated iteration is also bounded by the
// host's CPU: this host's cores, shared by the nodes mpirun started on it.
Options::SchedulePlan schedulePlanFrom(const std::string& path, std::int64_t batch, double stack_bytes_per_s);

}  // namespace poseidon::app
