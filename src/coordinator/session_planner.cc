#include "coordinator/session_planner.h"

#include <exception>
#include <string>

#include "comm/control_channel.h"
#include "coordinator/rate_probe.h"
#include "coordinator/node_map.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

// The schedule rule's plan (Options::schedule_plan), asked on rank 0 only, so that every
// rank trains the same plan whatever its host (its cores, its copy of the profile) says;
// rank 0's answer, or its error, reaches every rank.
std::vector<std::string> schedulePlanOfRankZero(ControlChannel& control, int me, const Options& o,
                                                const ModelInfo& model, int nodes, int per_node,
                                                const PlatformRates& rates) {
  std::string answer;
  if (me == 0) {
    try {  // validate() saw a plan callback on every rank
      answer = "plan:";
      for (const auto& scheme :
           o.schedule_plan(model, o.batch, nodes, per_node, rates.bandwidth_bytes_per_s, rates.gemm_flops_per_s)) {
        answer += scheme + ",";
      }
    } catch (const OptionError& e) {  // its options stay fields, for each front end to say
      answer = "option:" + e.in([](const std::string& field, const std::string& value) {
        return "{" + field + (value.empty() ? "" : "=" + value) + "}";
      });
    } catch (const std::exception& e) {  // any failure: the other ranks wait in the broadcast below
      answer = std::string("error:") + e.what();
    } catch (...) {
      answer = "error:the schedule rule's plan failed with an unknown exception";
    }
  }
  answer = control.broadcast(answer, 0, "the schedule rule's plan");
  if (answer.rfind("error:", 0) == 0) throw InputError(answer.substr(6));
  if (answer.rfind("option:", 0) == 0) throw OptionError(answer.substr(7));
  std::vector<std::string> plan;
  for (std::size_t at = 5, comma; (comma = answer.find(',', at)) != std::string::npos; at = comma + 1) {
    plan.push_back(answer.substr(at, comma - at));
  }
  return plan;
}

// The schedule rule's choice over the time rule's plan: SFB only where the planner offers
// it. Allreduce layers stay: the simulator behind the rule runs PS and SFB only.
void applySchedulePlan(const std::vector<std::string>& chosen, const ModelInfo& model, std::vector<LayerPlan>& plan) {
  if (chosen.size() != model.layers.size()) {
    throw InputError(detail::cat("the schedule rule gave ", chosen.size(), " schemes for a model of ",
                                 model.layers.size(), " layers with parameters"));
  }
  for (std::size_t l = 0; l < plan.size(); ++l) {
    const std::string& name = model.layers[l].name;
    if (chosen[l] != "ps" && chosen[l] != "sfb")
      throw InputError("the schedule rule chose '" + chosen[l] + "' for " + name);
    if (chosen[l] == "sfb" && plan[l].sfb_floats <= 0) {
      throw InputError("the schedule rule chose sfb for '" + name + "', which cannot go by sufficient factors");
    }
    if (plan[l].scheme == Scheme::kAllreduce) continue;
    const Scheme s = chosen[l] == "sfb" ? Scheme::kSFB : Scheme::kPS;
    if (s != plan[l].scheme) plan[l].reason += "; schedule rule: a shorter simulated iteration";
    plan[l].scheme = s;
  }
}

// SSP and straggler dropping bound or drop a worker's pushes to the servers: PS layers only.
void checkPlanForSlowWorkers(const Options& options, const ModelInfo& model, const std::vector<LayerPlan>& plan) {
  if (options.straggler_timeout.count() == 0 && options.staleness == 0) return;
  const char* option = options.staleness > 0 ? "{staleness}" : "{straggler_timeout}";
  for (std::size_t l = 0; l < plan.size(); ++l) {
    if (plan[l].scheme != Scheme::kPS) {
      throw OptionError(detail::cat(option, " works on parameter-server layers, and layer '", model.layers[l].name,
                                    "' goes by ", schemeName(plan[l].scheme), "; add {scheme=ps}"));
    }
  }
}

}  // namespace

SessionPlan planSession(ControlChannel& control, int rank, int ranks, const Options& options, SchemeMode mode,
                        CostRule rule, WireShares shares, const ModelInfo& model, const ClusterInfo& cluster,
                        const NodeMap& nodes) {
  const int per_node = nodes.devicesPerNode();
  SessionPlan out;
  out.rates = PlatformRates{options.bandwidth, options.gemm_flops};
  if (mode == SchemeMode::kAuto && rule != CostRule::kBytes && !out.rates.known()) {
    // With nodes, SFB reconstructs from every device's factors: K = the node's batch.
    out.rates = measureRates(control, rank, ranks, model, cluster.workers(), options.batch * per_node, out.rates);
  }
  // SFB's K is a node's whole batch: its devices' factors travel stacked.
  PlanRequest request{mode, rule, options.batch, out.rates};
  request.setWire(shares);
  // BSP without dropping, flat ranks, a per-layer rule: ties to allreduce (PlanRequest says
  // why). Not through a node's leaders, where allreduce measured slower than PS
  // (docs/benchmarks/nodes-hierarchical-vs-flat.txt).
  request.allreduce_on_ties = options.staleness == 0 && options.straggler_timeout.count() == 0 &&
                              rule != CostRule::kSchedule && !nodes.hierarchical();
  request.sparse_rows = request.allreduce_on_ties;  // the same runs: flat BSP, a per-layer rule
  out.layers = nodes.hierarchical() ? planForNodes(model, nodes.nodes(), per_node, request)
                                    : planSchemes(model, cluster, request);
  if (mode == SchemeMode::kAuto && rule == CostRule::kSchedule) {
    applySchedulePlan(schedulePlanOfRankZero(control, rank, options, model, cluster.workers(), per_node, out.rates),
                      model, out.layers);
  }
  for (std::size_t l = 0; nodes.hierarchical() && l < out.layers.size(); ++l) {
    if (model.layers[l].numel() == 0) {
      throw OptionError(detail::cat("layer '", model.layers[l].name,
                                    "' holds no values, which the devices level cannot "
                                    "sync; drop it or run flat ({devices_per_node=1})"));
    }
  }
  checkPlanForSlowWorkers(options, model, out.layers);
  return out;
}

}  // namespace poseidon
