#include "profile_model.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "models/model_spec.h"
#include "poseidon/errors.h"
#include "profile/compute_profile.h"
#include "simulate/schedule_rule.h"

namespace poseidon::app {

namespace {

// The model a profile describes: its own shape lines, or (older profiles, which carry
// times only) the layers of --model / --model-file.
ModelInfo profiledLayers(const std::string& path, const std::string& model, const std::string& model_file,
                         const ComputeProfile& profile) {
  if (!profile.shapes.empty()) {
    if (!model.empty() || !model_file.empty()) {
      throw InputError("--profile " + path + " describes its model's layers: drop --model and --model-file");
    }
    ModelInfo info;
    info.name = path;
    info.layers = profile.shapes;
    return info;
  }
  if (model.empty() && model_file.empty()) {
    throw InputError("--profile " + path + " has times only (no shape lines): name the model that made it with "
                     "--model or --model-file");
  }
  const ModelSpec spec = model_file.empty() ? builtinModel(model) : parseModelFile(model_file);
  return modelInfoFromSpec(spec);
}

}  // namespace

// Time spent outside the layers with parameters (ReLU, pooling, the loop) is shared out in
// proportion to each layer's.
sim::SimModel profiledModel(const std::string& path, const std::string& model, const std::string& model_file) {
  const ComputeProfile profile = readProfile(path);
  const ModelInfo info = profiledLayers(path, model, model_file, profile);
  sim::SimModel m;
  m.name = info.name;
  m.profile_batch = profile.batch;
  if (profile.cpu_iteration_ms > 0) m.cpu_per_iteration_s = profile.cpu_iteration_ms / 1e3;
  m.default_batch = profile.batch;
  double fwd = 0, bwd = 0;
  for (const auto& layer : info.layers) {
    const auto it = profile.layers.find(layer.name);
    if (it == profile.layers.end()) {
      throw InputError("--profile " + path + " has no layer '" + layer.name + "': was it written for --model " +
                       m.name + "?");
    }
    sim::SimLayer l;
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

namespace {

// The ranks mpirun started on this host (1 without mpirun).
int localRanks() {
  const char* text = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = text ? std::atoi(text) : 1;
  return n > 0 ? n : 1;
}

}  // namespace

Options::SchedulePlan schedulePlanFrom(const std::string& path, std::int64_t batch, double stack_bytes_per_s) {
  return [path, batch, stack_bytes_per_s](int nodes, int devices, double bandwidth, double gemm_flops) {
    const sim::SimModel model = profiledModel(path, "", "");
    sim::SimConfig c;
    c.nodes = nodes;
    c.devices_per_node = devices;
    c.batch = batch;
    c.bandwidth_bytes_per_s = bandwidth;
    c.gemm_flops_per_s = gemm_flops;
    c.iterations = 4;
    if (stack_bytes_per_s > 0) {
      c.host_cores = std::max(1u, std::thread::hardware_concurrency());
      c.nodes_per_host = std::max(1, localRanks() / devices);
      c.stack_bytes_per_s = stack_bytes_per_s;
    }
    const sim::ScheduleChoice choice = sim::chooseBySchedule(model, c);
    std::vector<std::pair<std::string, std::string>> plan;
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      plan.emplace_back(model.layers[l].info.name, choice.schemes[l] == Scheme::kSFB ? "sfb" : "ps");
    }
    return plan;
  };
}

}  // namespace poseidon::app
