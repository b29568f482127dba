// A measured profile (`poseidon train --profile-out`, Python's write_profile) as the
// simulator's model, and the schedule rule over it for a training session. Used by the
// CLI (`simulate`, `plan`, `train --cost-model schedule`) and the Python package.
#pragma once

#include <cstdint>
#include <string>

#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "profile/compute_profile.h"
#include "simulate/schedule_rule.h"
#include "simulate/sim_model.h"

namespace poseidon::sim {

// `profile`'s times (read from `path`) on `layers`' layers, found by name; throws
// InputError naming `path` where one is missing.
SimModel timedModel(const std::string& path, const ComputeProfile& profile, const ModelInfo& layers);
// The profile's times on a live model's layers; a profile with shape lines must describe
// the same layers (names and sizes).
SimModel profiledModel(const std::string& path, const ModelInfo& live);

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
  std::int64_t pair_bytes = kDefaultPairBytes;  // the information book's largest KV pair
  WireFormat wire = WireFormat::kFp32;           // how PS layers travel (SimConfig::wire)
  bool error_feedback = false;                   // SFB factors in fp32 (SimConfig::error_feedback)
};
// Iterations each plan is simulated for: one to warm up, three measured.
constexpr int kScheduleIterations = 4;
ScheduleChoice scheduleOf(const SimModel& model, const ScheduleCluster& cluster);

// The schedule rule for a training session (Options::schedule_plan): the profile at `path`
// on the session's model, batch, cluster and rates, with the session's KV pairs of at most
// `pair_bytes`. With `stack_bytes_per_s` > 0 each simulated iteration is also bounded by the
// host's CPU: this host's cores, shared by the `local_ranks` ranks started on it.
Options::SchedulePlan schedulePlanFrom(const std::string& path, std::int64_t pair_bytes, double stack_bytes_per_s,
                                       int local_ranks);

}  // namespace poseidon::sim
