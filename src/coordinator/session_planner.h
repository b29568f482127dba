// The coordinator's plan for one session (ATC'17 §3.3): the machine's rates (measured at
// start-up where the rule needs them), HybComm's scheme per layer, the schedule rule's
// answer where asked for, and the checks a plan must pass before any layer is wired.
// Collective over the session's control channel: every rank reaches the same plan.
#pragma once

#include <vector>

#include "coordinator/cluster_info.h"
#include "coordinator/scheme_planner.h"
#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "poseidon/plan.h"

namespace poseidon {

class ControlChannel;
class NodeMap;

struct SessionPlan {
  PlatformRates rates;
  std::vector<LayerPlan> layers;
};

// `mode` and `rule` as checkOptions parsed them from `options`; `nodes` the devices level
// as the session found it; `shares` PlanRequest's. Throws OptionError for a plan the
// options cannot train.
SessionPlan planSession(ControlChannel& control, int rank, int ranks, const Options& options, SchemeMode mode,
                        CostRule rule, WireShares shares, const ModelInfo& model, const ClusterInfo& cluster,
                        const NodeMap& nodes);

}  // namespace poseidon
