#include "plan_command.h"

#include "poseidon/option_table.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "client/checked_options.h"
#include "coordinator/cluster_info.h"
#include "coordinator/cost_model.h"
#include "coordinator/scheme_planner.h"
#include "coordinator/units.h"
#include "models/model_spec.h"
#include "option_flags.h"
#include "poseidon/errors.h"
#include "profile_model.h"
#include "simulate/profiled_model.h"

namespace poseidon::app {

namespace {

// The FC layers of the papers' networks (out x in); their conv layers are not listed.
const std::map<std::string, std::vector<std::pair<long long, long long>>>& paperModels() {
  static const std::map<std::string, std::vector<std::pair<long long, long long>>> m = {
      {"alexnet", {{4096, 9216}, {4096, 4096}, {1000, 4096}}},
      {"vgg16", {{4096, 25088}, {4096, 4096}, {1000, 4096}}},
      {"vgg19", {{4096, 25088}, {4096, 4096}, {1000, 4096}}},
      {"vgg19-22k", {{4096, 25088}, {4096, 4096}, {21841, 4096}}},
  };
  return m;
}

LayerInfo fcLayer(const std::string& name, long long M, long long N) {
  LayerInfo l;
  l.name = name;
  l.kind = LayerKind::kFC;
  l.M = M;
  l.N = N;
  l.tensors = {{"weight", {M, N}}};  // the papers count the weight matrix only
  return l;
}

ModelInfo planModel(const PlanOptions& o, const sim::SimModel* profiled, std::string& note) {
  if (profiled) {
    note = "layers and times from the profile";
    return profiled->info();
  }
  ModelInfo m;
  if (!o.layers.empty()) {
    m.name = "layers";
    for (const auto& text : o.layers) {
      long long M = 0, N = 0;
      char x = 0, extra = 0;
      if (std::sscanf(text.c_str(), "%lld%c%lld%c", &M, &x, &N, &extra) != 3 || (x != 'x' && x != 'X') || M <= 0 ||
          N <= 0) {
        throw InputError("--layer " + text + ": give an FC layer as MxN, e.g. 4096x4096 (M outputs, N inputs)");
      }
      m.layers.push_back(fcLayer("fc" + std::to_string(m.layers.size()), M, N));
    }
    return m;
  }
  auto paper = paperModels().find(o.model);
  if (paper != paperModels().end() && o.model_file.empty()) {
    m.name = o.model;
    int i = 6;
    for (const auto& [M, N] : paper->second) m.layers.push_back(fcLayer("fc" + std::to_string(i++), M, N));
    note = "FC layers only (weights), as in the papers";
    return m;
  }
  return modelInfoFromSpec(o.model_file.empty() ? builtinModel(o.model) : parseModelFile(o.model_file));
}

// The schedule rule: the plan whose simulated iteration (the profile's layer times, WFBP,
// the link in priority order, the reconstruction on the device) is shortest. `o.batch` is
// a node's by now (runPlan multiplied it by the devices).
sim::ScheduleChoice scheduleChoice(const PlanOptions& o, const sim::SimModel& model, const PlatformRates& rates) {
  sim::ScheduleCluster c;
  c.nodes = o.nodes > 0 ? o.nodes : o.workers;
  c.devices_per_node = o.nodes > 0 ? o.devices_per_node : 1;
  c.batch = o.batch / c.devices_per_node;
  c.bandwidth_bytes_per_s = rates.bandwidth_bytes_per_s;
  c.gemm_flops_per_s = rates.gemm_flops_per_s;
  c.host_cores = o.host_cores;
  c.nodes_per_host = o.nodes_per_host;
  c.stack_bytes_per_s = parseRateOrOff(o.stack_rate, "stack_rate");
  c.wire = parseWireFormat(o.session.wire);
  c.error_feedback = o.session.error_feedback;
  return sim::scheduleOf(model, c);
}

// The schedule rule's choice over the time rule's plan; allreduce layers stay (the
// simulator has no collectives), as in the session.
void applySchedule(const sim::ScheduleChoice& schedule, std::vector<LayerPlan>& plans) {
  for (std::size_t l = 0; l < plans.size(); ++l) {
    if (plans[l].scheme == Scheme::kAllreduce) continue;
    if (schedule.schemes[l] != plans[l].scheme) plans[l].reason += "; schedule rule: a shorter simulated iteration";
    plans[l].scheme = schedule.schemes[l];
  }
}

void checkScheduleRule(const PlanOptions& o, const PlatformRates& rates) {
  if (o.profile.empty()) {
    throw InputError(
        "--cost-model schedule simulates iterations from measured layer times: give --profile FILE "
        "(from `poseidon train --profile-out FILE`)");
  }
  if (!rates.known()) throw InputError("--cost-model schedule needs --bandwidth and --gemm-flops");
  // What the rule's simulation assumes of a run, as `poseidon train` checks it.
  Options run;
  run.cost_model = o.session.cost_model;
  run.shards = o.servers;
  try {
    checkScheduleRule(run, SchemeMode::kAuto);
  } catch (const OptionError& e) {
    throw InputError(e.in(sayAsPlanFlag));
  }
  if (o.host_cores == 0 && (o.nodes_per_host != 1 || parseRateOrOff(o.stack_rate, "stack_rate") > 0)) {
    throw InputError("--nodes-per-host and --stack-rate go with --host-cores C (the cores the host's nodes share)");
  }
}

}  // namespace

CLI::App* addPlanCommand(CLI::App& app, PlanOptions& o) {
  auto* cmd = app.add_subcommand("plan",
                                 "Show the communication cost of each layer under PS, SFB and the 2015 "
                                 "paper's strategy, and the scheme BestScheme picks (no MPI needed)");
  cmd->footer(
      "Examples:\n"
      "  poseidon plan --model vgg19 --workers 8 --batch 32\n"
      "  poseidon plan --layer 4096x4096 --workers 8 --batch 32 --bandwidth 1gbit --gemm-flops 50G\n"
      "  poseidon plan --profile fcnet.prof --nodes 4 --cost-model schedule --bandwidth 1gbit --gemm-flops 50G\n"
      "Floats are per node per iteration, what it sends plus what it receives (ATC'17 Table 1).");
  cmd->add_option("--model", o.model, "fcnet, convnet, mlp, or the papers' alexnet, vgg16, vgg19, vgg19-22k")
      ->capture_default_str();
  cmd->add_option("--model-file", o.model_file, "Sequential net described in a text file");
  cmd->add_option("--layer", o.layers, "An FC layer MxN (repeatable); replaces --model");
  cmd->add_option("--profile", o.profile,
                  "Layers and measured times from `poseidon train --profile-out FILE` (or "
                  "Python's write_profile); replaces --model, needed by --cost-model schedule");
  cmd->add_option("--workers", o.workers, "P1, the number of workers")->capture_default_str();
  cmd->add_option("--servers", o.servers, "P2, parameter-server shards (0: one per worker, co-located)");
  cmd->add_option("--batch", o.batch, "K, examples per worker per iteration")->capture_default_str();
  cmd->add_option("--nodes", o.nodes,
                  "The devices level: P1 = this many nodes (replaces --workers), each summing or stacking its "
                  "--devices-per-node devices' share before the exchange");
  cmd->add_option("--devices-per-node", o.devices_per_node,
                  "With --nodes: devices (ranks) per node; K per node is "
                  "this times --batch")
      ->capture_default_str();
  cmd->add_option("--bandwidth", o.bandwidth, "Link rate per node, e.g. 1gbit or 10gbit: adds predicted times");
  // The session option's parser (the option table), as `poseidon train --gemm-flops`.
  cmd->add_option_function<std::string>(
         "--gemm-flops",
         [&o](const std::string& text) {
           Options parsed;
           setOption(parsed, *findOption("gemm_flops"), text);
           o.gflops = parsed.gemm_flops / 1e9;
         },
         "GEMM rate in flop/s (e.g. 50G), for the SFB reconstruction time")
      ->type_name("FLOP/S");
  addOptionFlags(cmd, o.session, {"cost_model", "wire", "error_feedback"});
  cmd->add_option("--host-cores", o.host_cores,
                  "With --cost-model schedule: bound each simulated iteration by a "
                  "host's cores, shared by its nodes' compute, reconstruction and communication (0: not modelled)")
      ->capture_default_str();
  cmd->add_option("--nodes-per-host", o.nodes_per_host, "With --host-cores: nodes sharing one host")
      ->capture_default_str();
  cmd->add_option("--stack-rate", o.stack_rate,
                  "With --host-cores: bytes communication moves per CPU second, e.g. "
                  "500MB (bench/system/host_cpu.py measures it)")
      ->capture_default_str();
  cmd->add_flag("--json", o.json, "One JSON object instead of the table");
  return cmd;
}

namespace {

// The flags checked, with a node counted as one worker of its devices' whole batch
// (planForNodes).
PlanOptions checkedOptions(const PlanOptions& given) {
  if (given.nodes < 0 || given.devices_per_node < 1 || (given.nodes == 0 && given.devices_per_node != 1)) {
    throw InputError("--devices-per-node goes with --nodes N (N >= 1) and must be at least 1");
  }
  if (given.nodes > 0 && given.servers != 0) throw InputError("--nodes puts a shard on every node: drop --servers");
  PlanOptions o = given;
  if (o.model.empty() && o.profile.empty()) o.model = "fcnet";
  if (o.nodes > 0) {
    o.workers = o.nodes;
    o.batch *= o.devices_per_node;
  }
  if (o.workers < 1) throw InputError("--workers must be at least 1");
  if (o.batch < 1) throw InputError("--batch must be at least 1");
  if (o.servers < 0) throw InputError("--servers must not be negative");
  if (!o.profile.empty() && !o.layers.empty()) throw InputError("give either --profile or --layer, not both");
  if (o.gflops < 0) throw InputError("--gemm-flops must be positive");
  return o;
}

PlanRequest planRequest(const PlanOptions& o) {
  PlanRequest req;
  req.mode = SchemeMode::kAuto;
  req.rule = parseCostRule(o.session.cost_model);
  req.batch = o.batch;
  if (!o.bandwidth.empty()) req.rates.bandwidth_bytes_per_s = parseBandwidth(o.bandwidth, "bandwidth");
  req.rates.gemm_flops_per_s = o.gflops * 1e9;
  const WireFormat wire = parseWireFormat(o.session.wire);
  checkErrorFeedback(wire, o.session.error_feedback);
  req.setWire(WireShares::of(wire, o.session.error_feedback));  // BSP server mode, as a session plans it
  req.allreduce_on_ties = req.rule != CostRule::kSchedule && o.nodes == 0;  // as a flat BSP session plans
  if (req.rule == CostRule::kTime && !req.rates.known()) {
    throw InputError("--cost-model time needs --bandwidth and --gemm-flops");
  }
  if (req.rule == CostRule::kSchedule) checkScheduleRule(o, req.rates);
  if (req.rule != CostRule::kSchedule && (o.host_cores != 0 || o.nodes_per_host != 1 || parseRateOrOff(o.stack_rate, "stack_rate") > 0)) {
    throw InputError(
        "--host-cores, --nodes-per-host and --stack-rate bound the schedule rule's simulated iterations: "
        "add --cost-model schedule");
  }
  if (!req.rates.known()) req.rates = PlatformRates{};  // predicted times only with both
  return req;
}

// Floats per node per iteration over the layers: all PS, SFB (or factor push) for the FC
// layers, the chosen schemes, and the chosen schemes' predicted seconds.
struct PlanTotals {
  double ps = 0, sfb = 0, factor_push = 0, chosen = 0, chosen_s = 0;

  void add(const LayerInfo& l, const LayerPlan& p) {
    const bool fc = l.kind == LayerKind::kFC;
    ps += p.ps_floats;
    sfb += fc ? p.sfb_floats : p.ps_floats;
    factor_push += fc ? p.factor_push_floats : p.ps_floats;
    chosen += p.scheme == Scheme::kSFB         ? p.sfb_floats
              : p.scheme == Scheme::kAllreduce ? p.allreduce_floats
                                               : p.ps_floats;
    chosen_s += p.scheme == Scheme::kSFB         ? p.sfb_seconds
                : p.scheme == Scheme::kAllreduce ? p.allreduce_seconds
                                                 : p.ps_seconds;
  }
};

nlohmann::ordered_json orNull(bool given, double value) {
  return given ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json layerJson(const LayerInfo& l, const LayerPlan& p, const PlanOptions& o, bool timed) {
  const bool fc = l.kind == LayerKind::kFC;
  nlohmann::ordered_json j;
  j["name"] = l.name;
  j["kind"] = layerKindName(l.kind);
  j["M"] = l.M;
  j["N"] = l.N;
  j["params"] = l.numel();
  j["ps_floats"] = p.ps_floats;
  j["sfb_floats"] = orNull(fc, p.sfb_floats);
  j["factor_push_floats"] = orNull(fc, p.factor_push_floats);
  j["allreduce_floats"] = orNull(p.allreduce_floats > 0, p.allreduce_floats);
  j["cluster_ps_floats"] = CostModel::psClusterFloats(l.numel(), 1, o.workers);
  if (fc) {
    j["cluster_sfb_floats"] = CostModel::sfbClusterFloats(l.M, l.N, o.workers, o.batch);
    j["cluster_factor_push_floats"] = CostModel::factorPushClusterFloats(l.M, l.N, o.workers, o.batch);
  }
  j["scheme"] = schemeName(p.scheme);
  j["bytes_choice"] = schemeName(p.bytes_choice);
  if (timed) {
    j["time_choice"] = schemeName(p.time_choice);
    j["ps_seconds"] = p.ps_seconds;
    j["sfb_seconds"] = orNull(fc, p.sfb_seconds);
    j["allreduce_seconds"] = orNull(p.allreduce_floats > 0, p.allreduce_seconds);
  }
  j["reason"] = p.reason;
  return j;
}

void printLayerRow(const LayerInfo& l, const LayerPlan& p, bool timed) {
  const bool fc = l.kind == LayerKind::kFC;
  const std::string shape = fc ? std::to_string(l.M) + "x" + std::to_string(l.N) : "-";
  std::printf("%-8s %-5s %13s %12lld %14.0f %14s %14s %14s %-9s", l.name.c_str(), layerKindName(l.kind), shape.c_str(),
              static_cast<long long>(l.numel()), p.ps_floats,
              fc ? std::to_string(static_cast<long long>(p.sfb_floats)).c_str() : "-",
              fc ? std::to_string(static_cast<long long>(p.factor_push_floats)).c_str() : "-",
              p.allreduce_floats > 0 ? std::to_string(std::llround(p.allreduce_floats)).c_str() : "-",
              schemeName(p.scheme));
  if (timed) std::printf(" %9.4f %9s", p.ps_seconds, fc ? std::to_string(p.sfb_seconds).substr(0, 9).c_str() : "-");
  std::printf("\n");
}

void printTableHead(const PlanOptions& o, const ModelInfo& model, int servers, const PlanRequest& req,
                    const std::string& note) {
  const std::string who = o.nodes > 0 ? detail::cat("P1 = ", o.nodes, " nodes x ", o.devices_per_node, " devices")
                                      : detail::cat("P1 = ", o.workers, " workers");
  std::printf("plan: %s, %s, P2 = %d server shards (%s), K = %lld per %s, cost model %s%s%s\n", model.name.c_str(),
              who.c_str(), servers, o.servers == 0 ? "co-located" : "separate", o.batch,
              o.nodes > 0 ? "node" : "worker", costRuleName(req.rule), note.empty() ? "" : "; ", note.c_str());
  std::printf("%-8s %-5s %13s %12s %14s %14s %14s %14s %-9s%s\n", "layer", "kind", "MxN", "params", "ps_floats",
              "sfb_floats", "factor_push_floats", "ar_floats", "chosen",
              req.rates.known() ? "      ps_s     sfb_s" : "");
}

void printTableFoot(const PlanTotals& t, const PlanRequest& req, const sim::ScheduleChoice& schedule) {
  std::printf(
      "total floats per node per iteration: all ps %.0f, sfb for FC %.0f, factor-push for FC %.0f, chosen %.0f "
      "(%.1fx fewer than all ps)\n",
      t.ps, t.sfb, t.factor_push, t.chosen, t.chosen > 0 ? t.ps / t.chosen : 1.0);
  if (req.rates.known())
    std::printf("predicted communication time per iteration, chosen schemes: %.4f s\n", t.chosen_s);
  if (req.rule == CostRule::kSchedule) {
    std::printf(
        "schedule rule: simulated iteration %.4f s with the chosen plan, %.4f s with the time rule's (%d "
        "plans simulated%s)\n",
        schedule.iteration_s, schedule.time_rule_s, schedule.simulated,
        schedule.exhaustive ? ", every combination" : ", one layer flipped at a time");
  }
}

void printJson(const PlanOptions& o, const ModelInfo& model, int servers, const PlanRequest& req,
               nlohmann::ordered_json layers, const PlanTotals& t, const sim::ScheduleChoice& schedule) {
  nlohmann::ordered_json j;
  j["model"] = model.name;
  j["workers"] = o.workers;
  if (o.nodes > 0) {
    j["nodes"] = o.nodes;
    j["devices_per_node"] = o.devices_per_node;
  }
  j["servers"] = servers;
  j["colocated"] = o.servers == 0;
  j["batch"] = o.batch;
  j["cost_model"] = costRuleName(req.rule);
  j["wire"] = o.session.wire;
  j["error_feedback"] = o.session.error_feedback;
  j["layers"] = std::move(layers);
  j["total_ps_floats"] = t.ps;
  j["total_sfb_floats"] = t.sfb;
  j["total_factor_push_floats"] = t.factor_push;
  j["total_chosen_floats"] = t.chosen;
  if (req.rates.known()) j["total_chosen_seconds"] = t.chosen_s;
  if (req.rule == CostRule::kSchedule) {
    j["schedule"] = {{"iteration_s", schedule.iteration_s},
                     {"time_rule_iteration_s", schedule.time_rule_s},
                     {"plans_simulated", schedule.simulated},
                     {"exhaustive", schedule.exhaustive}};
  }
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

int runPlan(const PlanOptions& given) {
  const PlanOptions o = checkedOptions(given);
  std::unique_ptr<sim::SimModel> profiled;
  if (!o.profile.empty()) profiled = std::make_unique<sim::SimModel>(profiledModel(o.profile, o.model, o.model_file));
  std::string note;
  const ModelInfo model = planModel(o, profiled.get(), note);
  // Co-located: every worker holds a shard. Separate servers: extra server-only ranks.
  const int servers = o.servers == 0 ? o.workers : o.servers;
  const ClusterInfo cluster =
      o.servers == 0 ? ClusterInfo(o.workers, 0, 0) : ClusterInfo(o.workers + servers, servers, servers);
  const PlanRequest req = planRequest(o);
  auto plans = planSchemes(model, cluster, req);
  sim::ScheduleChoice schedule;
  if (req.rule == CostRule::kSchedule) {
    schedule = scheduleChoice(o, *profiled, req.rates);
    applySchedule(schedule, plans);
  }
  PlanTotals totals;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  if (!o.json) printTableHead(o, model, servers, req, note);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    totals.add(model.layers[i], plans[i]);
    if (o.json) {
      layers.push_back(layerJson(model.layers[i], plans[i], o, req.rates.known()));
    } else {
      printLayerRow(model.layers[i], plans[i], req.rates.known());
    }
  }
  if (o.json) {
    printJson(o, model, servers, req, std::move(layers), totals, schedule);
  } else {
    printTableFoot(totals, req, schedule);
  }
  return 0;
}

}  // namespace poseidon::app
