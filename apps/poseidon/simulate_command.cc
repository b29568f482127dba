#include "simulate_command.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "coordinator/scheme_planner.h"
#include "coordinator/units.h"
#include "models/model_spec.h"
#include "option_flags.h"
#include "poseidon/errors.h"
#include "profile_model.h"
#include "simulate/calibration.h"
#include "simulate/paper_models.h"
#include "simulate/simulator.h"

namespace poseidon::app {

namespace {

using nlohmann::ordered_json;
using sim::SimConfig;
using sim::SimModel;
using sim::SimResult;

// "50us", "1ms", "0.2s" or "0" in seconds.
double parseSeconds(const std::string& text, const std::string& flag) {
  if (text.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  double scale = -1;
  if (unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us")
    scale = 1e-6;
  else if (unit.empty() && v == 0)
    scale = 0;
  if (end == text.c_str() || scale < 0 || !(v >= 0) || v * scale > 10) {
    throw InputError(flag + " " + text + ": give a delay such as 50us, 1ms or 0");
  }
  return v * scale;
}

// FLOP/s: "4.2e12", "4200G" or "4.2T".
double parseFlops(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit(end);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double scale = -1;
  if (unit.empty())
    scale = 1;
  else if (unit == "g" || unit == "gflops")
    scale = 1e9;
  else if (unit == "t" || unit == "tflops")
    scale = 1e12;
  if (end == text.c_str() || scale < 0 || !(v > 0)) {
    throw InputError(flag + " " + text + ": give FLOP/s such as 4.2e12, 4200G or 4.2T");
  }
  return v * scale;
}

std::vector<int> parseSweep(const std::string& text) {
  std::vector<int> nodes;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string word = text.substr(at, comma - at);
    char* end = nullptr;
    const long v = std::strtol(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0' || v < 1 || v > 100000) {
      throw InputError("--sweep " + text + ": give node counts such as 1,2,4,8 (each 1 to 100000)");
    }
    nodes.push_back(static_cast<int>(v));
    at = comma + 1;
  }
  return nodes;
}

struct Plan {
  SimModel model;
  SimConfig base;
  std::vector<int> nodes;
  std::vector<sim::System> systems;
  std::string calibration;
};

Plan makePlan(const SimulateOptions& o) {
  Plan p;
  p.model = o.profile.empty() ? sim::paperModel(o.model.empty() ? kDefaultModel : o.model)
                              : profiledModel(o.profile, o.model, o.model_file);
  if (o.profile.empty() && !o.model_file.empty()) throw InputError("--model-file goes with --profile FILE");
  if (o.nodes != 0 && !o.sweep.empty()) throw InputError("give either --nodes N or --sweep LIST, not both");
  if (o.nodes < 0) throw InputError("--nodes must be at least 1");
  p.nodes = o.nodes > 0 ? std::vector<int>{o.nodes} : parseSweep(o.sweep.empty() ? "1,2,4,8,16,32" : o.sweep);
  p.systems = o.system == "all" ? sim::allSystems() : std::vector<sim::System>{sim::parseSystem(o.system)};
  SimConfig& c = p.base;
  c.order = sim::parseOrder(o.order);
  c.devices_per_node = o.devices_per_node;
  if (o.batch < 0) throw InputError("--batch must be at least 1");
  c.batch = o.batch > 0 ? o.batch : p.model.default_batch;
  c.bandwidth_bytes_per_s = parseBandwidth(o.bandwidth, "bandwidth");
  c.latency_s = parseSeconds(o.latency, "--latency");
  if (!o.switch_capacity.empty()) c.switch_bytes_per_s = parseBandwidth(o.switch_capacity, "switch_capacity");
  if (o.profile.empty()) {
    c.device_flops_per_s =
        o.device_rate.empty() ? sim::calibratedDeviceRate() : parseFlops(o.device_rate, "--device-rate");
    p.calibration = o.device_rate.empty() ? "fitted: VGG19 at 35.5 images/s, batch 32, one Titan X (ATC'17)"
                                          : "given by --device-rate";
  } else {
    if (!o.device_rate.empty()) throw InputError("--device-rate is for built-in models: a profile has measured times");
    p.calibration = "measured: " + o.profile;
  }
  if (!o.gemm_rate.empty()) c.gemm_flops_per_s = parseFlops(o.gemm_rate, "--gemm-rate");
  if (p.model.profile_batch > 0 && c.gemm_flops_per_s == 0) {
    throw InputError("--profile needs --gemm-rate: the GEMM rate of the profiled machine for SFB, e.g. 50G");
  }
  c.reduce_bytes_per_s = parseRateOrOff(o.reduce_rate, "reduce_rate");
  if (o.reconstruct != "device" && o.reconstruct != "separate") {
    throw InputError("--reconstruct " + o.reconstruct + ": use device or separate");
  }
  c.reconstruct_on_device = o.reconstruct == "device";
  c.host_cores = o.host_cores;
  c.nodes_per_host = o.nodes_per_host;
  c.stack_bytes_per_s = parseRateOrOff(o.stack_rate, "stack_rate");
  c.wire = parseWireFormat(o.session.wire);
  c.error_feedback = o.session.error_feedback;
  if (c.host_cores == 0 && (o.nodes_per_host != 1 || c.stack_bytes_per_s > 0)) {
    throw InputError("--nodes-per-host and --stack-rate go with --host-cores C (the cores the host's nodes share)");
  }
  c.rule = parseCostRule(o.cost_model);
  c.pair_bytes = o.session.kv_pair_bytes;
  c.iterations = o.iterations;
  c.validate();
  return p;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double maxOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

ordered_json layersJson(const SimResult& r) {
  ordered_json a = ordered_json::array();
  for (const auto& l : r.layers) {
    a.push_back({{"name", l.name},
                 {"scheme", schemeName(l.scheme)},
                 {"params", l.params},
                 {"forward_s", l.forward_s},
                 {"backward_s", l.backward_s},
                 {"backward_end_s", l.backward_end_s},
                 {"sync_end_s", l.sync_end_s},
                 {"forward_wait_s", l.forward_wait_s},
                 {"bytes_sent_per_node", l.bytes_sent_per_node}});
  }
  return a;
}

ordered_json runJson(const SimResult& r, double speedup) {
  return {{"system", sim::systemName(r.system)},
          {"order", sim::orderName(r.order)},
          {"nodes", r.nodes},
          {"iteration_s", r.iteration_s},
          {"schedule_s", r.schedule_s},
          {"cpu_bound_s", r.cpu_bound_s},
          {"compute_s", r.compute_s},
          {"images_per_s", r.images_per_s},
          {"speedup", speedup},
          {"sfb_layers", r.sfb_layers},
          {"messages_simulated", static_cast<double>(r.messages)},
          {"uplink_utilisation_mean", mean(r.uplink_utilisation)},
          {"uplink_utilisation_max", maxOf(r.uplink_utilisation)},
          {"downlink_utilisation_mean", mean(r.downlink_utilisation)},
          {"downlink_utilisation_max", maxOf(r.downlink_utilisation)},
          {"uplink_utilisation", r.uplink_utilisation},
          {"downlink_utilisation", r.downlink_utilisation},
          {"layers", layersJson(r)}};
}

void printLayers(const SimResult& r) {
  std::printf("  %-28s %-4s %12s %9s %9s %11s %9s %11s\n", "layer", "sch", "params", "fwd_ms", "bwd_ms", "bwd_end_ms",
              "sync_ms", "fwd_wait_ms");
  for (const auto& l : r.layers) {
    std::printf("  %-28s %-4s %12.0f %9.2f %9.2f %11.2f %9.2f %11.2f%s\n", l.name.c_str(), schemeName(l.scheme),
                l.params, l.forward_s * 1e3, l.backward_s * 1e3, l.backward_end_s * 1e3, l.sync_end_s * 1e3,
                l.forward_wait_s * 1e3, l.forward_wait_s > 0 ? "  <- critical" : "");
  }
}

}  // namespace

CLI::App* addSimulateCommand(CLI::App& app, SimulateOptions& o) {
  auto* cmd = app.add_subcommand("simulate",
                                 "Simulate training iterations on N nodes (discrete events, no MPI): "
                                 "iteration time, images/s, speedup, link use, critical path");
  cmd->footer(
      "Systems: poseidon (WFBP + HybComm: PS or SFB per layer as BestScheme picks), wfbp (WFBP, PS for every\n"
      "layer), ps (naive: every sync after the whole backward), coarse (TensorFlow-like: each tensor whole on\n"
      "one server, round-robin). The plan and KV pairs come from the real planner and information book.\n"
      "Compute: built-in models from their architectures' FLOPs at --device-rate (default fitted so that one\n"
      "node runs VGG19 at ATC'17's 35.5 images/s), backward = 2 x forward; or --profile from a real run.\n"
      "Speedup is over one node of the same system. Assumptions: docs/SIMULATOR.md.\n"
      "Examples:\n"
      "  poseidon simulate --model vgg19-22k --nodes 32 --bandwidth 40gbit\n"
      "  poseidon simulate --model vgg19-22k --sweep 1,8,32,64,128,256 --system poseidon --json\n"
      "  poseidon simulate --profile fcnet.prof --gemm-rate 50G --nodes 4 --bandwidth 1gbit");
  cmd->add_option("--model", o.model,
                  "alexnet, vgg19, vgg19-22k (the default), googlenet, inception-v3, resnet-152; "
                  "with a --profile that has no shape lines, the model that made it (fcnet, convnet, mlp)");
  cmd->add_option("--model-file", o.model_file,
                  "With a --profile that has no shape lines: the model file it was "
                  "made with");
  cmd->add_option("--profile", o.profile,
                  "Per-layer times (and shapes) from `poseidon train --profile-out FILE` or "
                  "Python's DistributedModel.write_profile(FILE)");
  cmd->add_option("--nodes", o.nodes, "N nodes (default: the sweep 1,2,4,8,16,32)");
  cmd->add_option("--sweep", o.sweep, "Node counts, e.g. 1,2,4,8,16,32,64,128,256");
  cmd->add_option("--devices-per-node", o.devices_per_node,
                  "D devices per node: they sum (or stack) before the "
                  "network, K = D x batch")
      ->capture_default_str();
  cmd->add_option("--batch", o.batch,
                  "Examples per device per iteration (default: the model's: 32 for VGG19, 128 "
                  "for GoogLeNet, 256 for AlexNet; the profile's)");
  cmd->add_option("--bandwidth", o.bandwidth, "Each node's NIC, each direction: 40gbit, 10gbit, 1gbit, 125MB")
      ->capture_default_str();
  cmd->add_option("--latency", o.latency, "One-way latency per message, e.g. 50us (default 0)");
  cmd->add_option("--switch-capacity", o.switch_capacity,
                  "All traffic through the switch, e.g. 320gbit "
                  "(default: non-blocking)");
  cmd->add_option("--system", o.system, "poseidon, wfbp, ps, coarse or all")->capture_default_str();
  cmd->add_option("--order", o.order,
                  "Which queued message a NIC sends next: priority (lowest layer first), fifo, "
                  "or default (priority for poseidon and wfbp)")
      ->capture_default_str();
  cmd->add_option("--device-rate", o.device_rate, "FLOP/s of one device for built-in models, e.g. 4.2T");
  cmd->add_option("--gemm-rate", o.gemm_rate, "FLOP/s of SFB reconstruction (default: --device-rate)");
  cmd->add_option("--reconstruct", o.reconstruct,
                  "Where SFB's reconstruction GEMM runs: device (between layers, "
                  "delaying them) or separate (overlapping the compute)")
      ->capture_default_str();
  cmd->add_option("--cost-model", o.cost_model,
                  "Poseidon's BestScheme: bytes (the paper's rule), time (bytes "
                  "over --bandwidth plus the reconstruction over --gemm-rate), or schedule "
                  "(the SFB/PS combination this simulation runs fastest)")
      ->capture_default_str();
  cmd->add_option("--reduce-rate", o.reduce_rate,
                  "Bytes/s a server sums a contribution (and steps) at, or a leader "
                  "sums its devices' gradients; 0: free")
      ->capture_default_str();
  cmd->add_option("--host-cores", o.host_cores,
                  "Cores of a host, a bound on the iteration: its nodes' compute threads "
                  "and network stack share them (0: not modelled)")
      ->capture_default_str();
  cmd->add_option("--nodes-per-host", o.nodes_per_host,
                  "Nodes sharing one host's cores (all of a `poseidon lab` "
                  "run's ranks share this machine)")
      ->capture_default_str();
  cmd->add_option("--stack-rate", o.stack_rate,
                  "Bytes the host's communication moves per CPU second (network stack, "
                  "MPI, copy and server threads; sender's and receiver's work together; "
                  "bench/simulator/simulator_vs_lab.py measures it); 0: free")
      ->capture_default_str();
  addOptionFlags(cmd, o.session, {"wire", "error_feedback", "kv_pair_bytes"});
  cmd->add_option("--iterations", o.iterations, "Iterations simulated; the first warms up")->capture_default_str();
  cmd->add_flag("--layers", o.layers, "Also print each run's per-layer critical path");
  cmd->add_flag("--json", o.json, "One JSON object instead of the table");
  return cmd;
}

int runSimulate(const SimulateOptions& o) {
  const Plan p = makePlan(o);
  ordered_json runs = ordered_json::array();
  if (!o.json) {
    std::printf(
        "simulate: %s, %.1f M parameters, batch %lld per device, %d device(s) per node, %s per node%s; "
        "device %.3g FLOP/s (%s)\n",
        p.model.name.c_str(), static_cast<double>(p.model.params()) / 1e6, static_cast<long long>(p.base.batch),
        p.base.devices_per_node, o.bandwidth.c_str(),
        p.base.switch_bytes_per_s > 0 ? (", switch " + o.switch_capacity).c_str() : ", non-blocking switch",
        p.base.device_flops_per_s, p.calibration.c_str());
    std::printf("%-9s %6s %12s %11s %9s %9s %9s %4s\n", "system", "nodes", "iteration_s", "images/s", "speedup",
                "up_mean", "up_max", "sfb");
  }
  for (sim::System system : p.systems) {
    SimConfig c = p.base;
    c.system = system;
    c.nodes = 1;
    const double one_node = sim::simulate(p.model, c).images_per_s;
    for (int n : p.nodes) {
      c.nodes = n;
      const SimResult r = sim::simulate(p.model, c);
      const double speedup = r.images_per_s / one_node;
      if (o.json) {
        runs.push_back(runJson(r, speedup));
        continue;
      }
      std::printf("%-9s %6d %12.4f %11.1f %8.2fx %8.0f%% %8.0f%% %4d%s\n", sim::systemName(system), n, r.iteration_s,
                  r.images_per_s, speedup, 100 * mean(r.uplink_utilisation), 100 * maxOf(r.uplink_utilisation),
                  r.sfb_layers, r.cpu_bound_s > r.schedule_s ? "  host CPU bound" : "");
      if (o.layers) printLayers(r);
    }
  }
  if (o.json) {
    ordered_json j;
    j["model"] = p.model.name;
    j["params"] = static_cast<double>(p.model.params());
    j["forward_flops_per_example"] = p.model.forwardFlopsPerExample();
    j["batch"] = p.base.batch;
    j["devices_per_node"] = p.base.devices_per_node;
    j["bandwidth_bytes_per_s"] = p.base.bandwidth_bytes_per_s;
    j["latency_s"] = p.base.latency_s;
    j["switch_bytes_per_s"] = p.base.switch_bytes_per_s;
    j["device_flops_per_s"] = p.base.device_flops_per_s;
    j["gemm_flops_per_s"] = p.base.gemmRate();
    j["reduce_bytes_per_s"] = p.base.reduce_bytes_per_s;
    j["reconstruct"] = o.reconstruct;
    j["cost_model"] = o.cost_model;
    j["calibration"] = p.calibration;
    j["runs"] = runs;
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace poseidon::app
