#include "simulate/schedule_rule.h"

#include "coordinator/scheme_planner.h"
#include "simulate/simulator.h"

namespace poseidon::sim {

namespace {

// The time rule's per-layer plan (the bytes rule's when the rates are not known), and the
// layers where SFB is an option at all.
std::vector<Scheme> perLayerPlan(const SimModel& model, const SimConfig& c, std::vector<int>& candidates) {
  PlanRequest req;
  req.mode = SchemeMode::kAuto;
  req.rates = PlatformRates{c.bandwidth_bytes_per_s, c.gemmRate()};
  req.rule = req.rates.known() ? CostRule::kTime : CostRule::kBytes;
  req.batch = c.batch;
  req.setWire(WireShares::of(c.wire, c.error_feedback));
  std::vector<Scheme> out;
  const auto plans = planForNodes(model.info(), c.nodes, c.devices_per_node, req);
  for (std::size_t l = 0; l < plans.size(); ++l) {
    if (plans[l].sfb_floats > 0) candidates.push_back(static_cast<int>(l));
    out.push_back(plans[l].scheme == Scheme::kSFB ? Scheme::kSFB : Scheme::kPS);
  }
  return out;
}

class Search {
 public:
  Search(const SimModel& model, SimConfig c) : model_(model), c_(std::move(c)) {}

  double iteration(const std::vector<Scheme>& schemes) {
    c_.schemes = schemes;
    ++simulated_;
    return simulate(model_, c_).iteration_s;
  }
  int simulated() const { return simulated_; }

 private:
  const SimModel& model_;
  SimConfig c_;
  int simulated_ = 0;
};

// A plan that is faster by more than rounding replaces the best so far.
bool faster(double t, double best) { return t < best * (1 - 1e-9); }

void exhaustive(Search& search, const std::vector<int>& candidates, ScheduleChoice& best) {
  const std::vector<Scheme> start = best.schemes;
  for (unsigned mask = 0; mask < (1u << candidates.size()); ++mask) {
    std::vector<Scheme> s = start;
    for (std::size_t i = 0; i < candidates.size(); ++i) s[candidates[i]] = (mask >> i) & 1 ? Scheme::kSFB : Scheme::kPS;
    if (s == start) continue;
    const double t = search.iteration(s);
    if (faster(t, best.iteration_s)) {
      best.schemes = s;
      best.iteration_s = t;
    }
  }
}

void descent(Search& search, const std::vector<int>& candidates, ScheduleChoice& best) {
  for (bool improved = true; improved;) {
    improved = false;
    for (int l : candidates) {
      std::vector<Scheme> s = best.schemes;
      s[l] = s[l] == Scheme::kSFB ? Scheme::kPS : Scheme::kSFB;
      const double t = search.iteration(s);
      if (faster(t, best.iteration_s)) {
        best.schemes = s;
        best.iteration_s = t;
        improved = true;
      }
    }
  }
}

}  // namespace

ScheduleChoice chooseBySchedule(const SimModel& model, SimConfig config) {
  config.system = System::kPoseidon;
  config.validate();
  std::vector<int> candidates;
  ScheduleChoice best;
  best.time_rule_schemes = perLayerPlan(model, config, candidates);
  Search search(model, config);
  best.schemes = best.time_rule_schemes;
  best.time_rule_s = best.iteration_s = search.iteration(best.schemes);
  best.exhaustive = candidates.size() <= static_cast<std::size_t>(kExhaustiveLayers);
  if (config.nodes > 1 && !candidates.empty()) {
    if (best.exhaustive)
      exhaustive(search, candidates, best);
    else
      descent(search, candidates, best);
  }
  best.simulated = search.simulated();
  return best;
}

}  // namespace poseidon::sim
