#include "coordinator/scheme_planner.h"

#include <algorithm>
#include <cstdio>

#include "poseidon/options.h"

namespace poseidon {

SchemeMode parseSchemeMode(const std::string& name) {
  if (name == "ps") return SchemeMode::kPS;
  if (name == "sfb") return SchemeMode::kSFB;
  if (name == "auto") return SchemeMode::kAuto;
  if (name == "factor-push") return SchemeMode::kFactorPush;
  if (name == "adam") {  // the scheme's name until 2026-11, after Project Adam; Adam is an optimizer
    throw OptionError(
        "{scheme=adam}: the factor-push scheme (after Project Adam) is now called {scheme=factor-push}; for the Adam "
        "optimizer, give {optimizer=adam}");
  }
  if (name == "allreduce") return SchemeMode::kAllreduce;
  throw OptionError("{scheme=" + name + "}: use ps, sfb, allreduce, auto or factor-push");
}

CostRule parseCostRule(const std::string& name) {
  if (name == "bytes") return CostRule::kBytes;
  if (name == "time") return CostRule::kTime;
  if (name == "schedule") return CostRule::kSchedule;
  throw OptionError("{cost_model=" + name + "}: use bytes, time or schedule");
}

const char* schemeModeName(SchemeMode mode) {
  switch (mode) {
    case SchemeMode::kPS:
      return "ps";
    case SchemeMode::kSFB:
      return "sfb";
    case SchemeMode::kAuto:
      return "auto";
    case SchemeMode::kFactorPush:
      return "factor-push";
    case SchemeMode::kAllreduce:
      return "allreduce";
  }
  return "?";
}

const char* costRuleName(CostRule rule) {
  switch (rule) {
    case CostRule::kBytes:
      return "bytes";
    case CostRule::kTime:
      return "time";
    case CostRule::kSchedule:
      return "schedule";
  }
  return "?";
}

namespace {

// Whether allreduce's cost `a` wins against `rival`: strictly less, or no more when ties go
// to it (the two sides' formulas may differ in the last bits for equal bytes).
bool beats(double a, double rival, bool on_tie) { return on_tie ? a <= rival * (1 + 1e-9) : a < rival; }

std::string format(const char* fmt, double a, double b, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
  return buf;
}

}  // namespace

WireShares WireShares::of(WireFormat pushes, WireFormat updates, WireFormat factors) {
  const auto share = [](WireFormat w) { return static_cast<double>(wireBytesPerFloat(w)) / sizeof(float); };
  return WireShares{CostModel::psWireShare(pushes, updates), share(pushes), share(factors)};
}

WireShares WireShares::of(WireFormat wire, bool error_feedback) {
  return of(wire, wire, factorWireOf(wire, error_feedback));
}

std::vector<LayerPlan> planSchemes(const ModelInfo& model, const ClusterInfo& cluster, const PlanRequest& req) {
  const int P1 = cluster.workers();
  const int P2 = cluster.shards();
  // The role of a typical worker, for Table 1's per-node counts.
  const PsRole role = cluster.hasShard(0) ? PsRole::kServerAndWorker : PsRole::kWorkerOnly;
  const bool time_rule = req.rule != CostRule::kBytes;  // the schedule rule starts from the time rule's choice
  if (time_rule && req.mode == SchemeMode::kAuto && !req.rates.known()) {
    throw InputError(
        detail::cat("the ", costRuleName(req.rule), " cost model needs the link bandwidth and the GEMM rate"));
  }
  // The collectives run among all ranks, so every rank must train.
  const bool allreduce_ok = P1 > 1 && cluster.serverOnly() == 0;
  const bool ties = req.allreduce_on_ties;
  if (req.mode == SchemeMode::kAllreduce && cluster.serverOnly() > 0) {
    throw OptionError("{scheme=allreduce} needs every rank to train: drop {server_ranks}");
  }
  std::vector<LayerPlan> plans;
  for (const auto& layer : model.layers) {
    LayerPlan p;
    const std::int64_t numel = layer.numel();
    p.ps_floats = CostModel::psFloats(numel, 1, P1, P2, role) * req.ps_wire_share;
    // Factor rows per worker: an input [batch, d1, ..., N] makes batch * d1 * ... rows.
    const std::int64_t K = req.batch * layer.rows_per_example;
    const bool fc = layer.kind == LayerKind::kFC && layer.factorable && P1 > 1;
    if (fc) {
      // The bias rides along with the factors (its gradient is the sum of U's rows).
      p.sfb_floats = CostModel::sfbFloats(layer.M, layer.N, P1, K) * req.sfb_wire_share;
      p.factor_push_floats = CostModel::factorPushFloats(layer.M, layer.N, K);
      p.bytes_choice = p.sfb_floats <= p.ps_floats ? Scheme::kSFB : Scheme::kPS;
    }
    // A synchronous step waits for its busiest node. Under PS with every rank a worker
    // that is a shard's node (2*M*N*(P1+P2-2)/P2): equal to the ring when every rank holds
    // a shard, more when shards are fewer than workers. That is where allreduce wins, and
    // on the tie with PlanRequest::allreduce_on_ties.
    const double ps_busiest = CostModel::psFloats(numel, 1, P1, P2, PsRole::kServerAndWorker) * req.ps_wire_share;
    if (allreduce_ok) {
      p.allreduce_floats = CostModel::allreduceFloats(numel, 1, P1) * req.allreduce_wire_share;
      const double best = p.bytes_choice == Scheme::kSFB ? p.sfb_floats : ps_busiest;
      if (beats(p.allreduce_floats, best, ties && p.bytes_choice == Scheme::kPS)) p.bytes_choice = Scheme::kAllreduce;
    }
    if (req.rates.known()) {
      const double bw = req.rates.bandwidth_bytes_per_s;
      // A node sends and receives half of the Table 1 count each; the link is full duplex.
      p.ps_seconds = p.ps_floats / 2 * sizeof(float) / bw;
      if (fc) {
        const double extra_flops = 2.0 * layer.M * layer.N * K * (P1 - 1);
        p.sfb_seconds = p.sfb_floats / 2 * sizeof(float) / bw + extra_flops / req.rates.gemm_flops_per_s;
        p.time_choice = p.sfb_seconds < p.ps_seconds ? Scheme::kSFB : Scheme::kPS;
      }
      if (allreduce_ok) {
        p.allreduce_seconds = p.allreduce_floats / 2 * sizeof(float) / bw;
        const double rival = p.time_choice == Scheme::kSFB ? p.sfb_seconds : ps_busiest / 2 * sizeof(float) / bw;
        if (beats(p.allreduce_seconds, rival, ties && p.time_choice == Scheme::kPS)) p.time_choice = Scheme::kAllreduce;
      }
    } else {
      p.time_choice = p.bytes_choice;
    }
    switch (req.mode) {
      case SchemeMode::kPS:
        p.scheme = Scheme::kPS;
        break;
      case SchemeMode::kSFB:
        p.scheme = fc ? Scheme::kSFB : Scheme::kPS;
        break;
      case SchemeMode::kFactorPush:
        p.scheme = fc ? Scheme::kFactorPush : Scheme::kPS;
        break;
      // Even with one worker: the collectives are trivial, but the engine path is the
      // same, which is what a one-rank benchmark of the designs measures.
      case SchemeMode::kAllreduce:
        p.scheme = Scheme::kAllreduce;
        break;
      case SchemeMode::kAuto:
        p.scheme = time_rule ? p.time_choice : p.bytes_choice;
        break;
    }
    if (P1 == 1 && req.mode != SchemeMode::kAllreduce) {
      p.reason = "one worker: nothing to exchange";
    } else if (req.mode != SchemeMode::kAuto) {
      p.reason = !fc && req.mode != SchemeMode::kAllreduce && req.mode != SchemeMode::kPS
                     ? (layer.kind == LayerKind::kFC ? "FC, but its factors cannot be captured"
                                                     : "not FC: no sufficient factors")
                     : std::string("forced by scheme ") + schemeModeName(req.mode);
    } else if (!fc && !allreduce_ok) {
      p.reason = "not FC: no sufficient factors";
    } else if (!fc) {
      p.reason = time_rule ? format("not FC; time: allreduce %.4f s vs ps %.4f s", p.allreduce_seconds, p.ps_seconds)
                           : format("not FC; bytes: allreduce %.0f floats vs ps %.0f", p.allreduce_floats, p.ps_floats);
    } else if (time_rule) {
      const double network = p.sfb_floats * 2 / req.rates.bandwidth_bytes_per_s;
      p.reason = format("time: sfb %.4f s (%.4f network + %.4f reconstruction) vs ps %.4f s", p.sfb_seconds, network,
                        p.sfb_seconds - network, p.ps_seconds);
      if (allreduce_ok) p.reason += format(" vs allreduce %.4f s", p.allreduce_seconds, 0);
    } else {
      p.reason = format("bytes: sfb %.0f floats vs ps %.0f", p.sfb_floats, p.ps_floats);
      if (allreduce_ok) p.reason += format(" vs allreduce %.0f", p.allreduce_floats, 0);
    }
    if (req.ps_wire_share != 1.0 && req.mode == SchemeMode::kAuto && P1 > 1) {
      p.reason += format(" (a 16-bit wire: ps x%.2f, sfb x%.2f, allreduce x%.2f of fp32's bytes)", req.ps_wire_share,
                         req.sfb_wire_share, req.allreduce_wire_share);
    }
    plans.push_back(p);
  }
  return plans;
}

std::vector<LayerPlan> planForNodes(const ModelInfo& model, int nodes, int devices, PlanRequest request) {
  if (nodes < 1 || devices < 1) throw InputError(detail::cat("a cluster of ", nodes, " nodes x ", devices, " devices"));
  request.batch *= devices;
  return planSchemes(model, ClusterInfo(nodes, 0, 0), request);
}

}  // namespace poseidon
