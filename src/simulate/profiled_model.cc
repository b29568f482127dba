#include "simulate/profiled_model.h"

#include <algorithm>
#include <thread>

#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon::sim {

namespace {

// A profile with shape lines must describe `live`'s layers, name for name and size for size.
void checkShapes(const std::string& path, const ComputeProfile& profile, const ModelInfo& live) {
  if (profile.shapes.empty()) return;
  const std::string other = "the profile " + path + " was written for another model: ";
  if (profile.shapes.size() != live.layers.size()) {
    throw InputError(
        detail::cat(other, profile.shapes.size(), " layers with parameters, the model has ", live.layers.size()));
  }
  for (std::size_t l = 0; l < live.layers.size(); ++l) {
    const LayerInfo& p = profile.shapes[l];
    const LayerInfo& m = live.layers[l];
    if (p.name != m.name || p.numel() != m.numel()) {
      throw InputError(detail::cat(other, "its layer '", p.name, "' (", p.numel(),
                                   " values) stands where the model has '", m.name, "' (", m.numel(), ")"));
    }
  }
}

}  // namespace

// Time spent outside the layers with parameters (ReLU, pooling, the loop) is shared out in
// proportion to each layer's.
SimModel timedModel(const std::string& path, const ComputeProfile& profile, const ModelInfo& info) {
  SimModel m;
  m.name = info.name;
  m.profile_batch = profile.batch;
  if (profile.cpu_iteration_ms > 0) m.cpu_per_iteration_s = profile.cpu_iteration_ms / 1e3;
  m.default_batch = profile.batch;
  double fwd = 0, bwd = 0;
  for (const auto& layer : info.layers) {
    const auto it = profile.layers.find(layer.name);
    if (it == profile.layers.end()) {
      throw OptionError("{profile=" + path + "} has no layer '" + layer.name + "': was it written for the model " +
                        m.name + "?");
    }
    SimLayer l;
    l.info = layer;
    l.forward_s = it->second.first / 1e3;
    l.backward_s = it->second.second / 1e3;
    fwd += l.forward_s;
    bwd += l.backward_s;
    m.layers.push_back(l);
  }
  // A forward that recorded no per-layer spans (a custom forward) has all its time in
  // `other`: shared out evenly then, rather than lost.
  const double layers = static_cast<double>(m.layers.size());
  for (auto& l : m.layers) {
    l.forward_s += profile.other_forward_ms / 1e3 * (fwd > 0 ? l.forward_s / fwd : 1 / layers);
    l.backward_s += profile.other_backward_ms / 1e3 * (bwd > 0 ? l.backward_s / bwd : 1 / layers);
  }
  return m;
}

SimModel profiledModel(const std::string& path, const ModelInfo& live) {
  const ComputeProfile profile = readProfile(path);
  checkShapes(path, profile, live);
  return timedModel(path, profile, live);
}

ScheduleChoice scheduleOf(const SimModel& model, const ScheduleCluster& cluster) {
  SimConfig c;
  c.nodes = cluster.nodes;
  c.devices_per_node = cluster.devices_per_node;
  c.batch = cluster.batch;
  c.bandwidth_bytes_per_s = cluster.bandwidth_bytes_per_s;
  c.gemm_flops_per_s = cluster.gemm_flops_per_s;
  c.host_cores = cluster.host_cores;
  c.nodes_per_host = cluster.nodes_per_host;
  c.stack_bytes_per_s = cluster.stack_bytes_per_s;
  c.pair_bytes = cluster.pair_bytes;
  c.wire = cluster.wire;
  c.error_feedback = cluster.error_feedback;
  c.iterations = kScheduleIterations;
  return chooseBySchedule(model, c);
}

Options::SchedulePlan schedulePlanFrom(const std::string& path, std::int64_t pair_bytes, double stack_bytes_per_s,
                                       int local_ranks) {
  return [path, pair_bytes, stack_bytes_per_s, local_ranks](const ModelInfo& live, std::int64_t batch, int nodes,
                                                            int devices, double bandwidth, double gemm_flops) {
    ScheduleCluster cluster;
    cluster.nodes = nodes;
    cluster.devices_per_node = devices;
    cluster.batch = batch;
    cluster.bandwidth_bytes_per_s = bandwidth;
    cluster.gemm_flops_per_s = gemm_flops;
    cluster.pair_bytes = pair_bytes;
    if (stack_bytes_per_s > 0) {
      cluster.host_cores = std::max(1u, std::thread::hardware_concurrency());
      cluster.nodes_per_host = std::max(1, local_ranks / devices);
      cluster.stack_bytes_per_s = stack_bytes_per_s;
    }
    const ScheduleChoice choice = scheduleOf(profiledModel(path, live), cluster);
    std::vector<std::string> plan;
    for (Scheme s : choice.schemes) plan.push_back(s == Scheme::kSFB ? "sfb" : "ps");
    return plan;
  };
}

}  // namespace poseidon::sim
