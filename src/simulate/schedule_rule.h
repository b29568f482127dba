// The schedule rule (the 2015 paper's bandwidth manager meets ATC'17's BestScheme): the
// byte and time rules price each layer alone, as if its sync were all exposed. Under WFBP it
// is not: an upper layer's sync hides behind the backward of the layers below and the next
// forward up to it, SFB's reconstruction delays the device, and the link is shared in
// priority order. This rule compares whole plans by what the simulator says an iteration
// takes and keeps the fastest; the per-layer time rule's plan is the start and wins ties.
#pragma once

#include <vector>

#include "coordinator/cost_model.h"
#include "simulate/sim_config.h"
#include "simulate/sim_model.h"

namespace poseidon::sim {

struct ScheduleChoice {
  std::vector<Scheme> schemes;  // per layer, PS or SFB
  double iteration_s = 0;       // simulated, with `schemes`
  std::vector<Scheme> time_rule_schemes;
  double time_rule_s = 0;   // simulated, with the time rule's per-layer choice
  int simulated = 0;        // plans simulated
  bool exhaustive = false;  // every combination of the layers that can go by SFB
};

// Every SFB/PS combination of the layers that can go by SFB when there are at most
// kExhaustiveLayers of them, else a descent that flips one layer at a time from the time
// rule's plan while that shortens the iteration. `config.system` is taken as Poseidon.
constexpr int kExhaustiveLayers = 8;
ScheduleChoice chooseBySchedule(const SimModel& model, SimConfig config);

}  // namespace poseidon::sim
