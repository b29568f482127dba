#include "coordinator/scheme_planner.h"

#include "comm/message.h"

#include <algorithm>
#include <cstdio>

#include "common/names.h"
#include "poseidon/options.h"

namespace poseidon {

namespace {

// In the order errors list them.
constexpr NameTable<SchemeMode, 5> kSchemeModes{{{SchemeMode::kPS, "ps"},
                                                 {SchemeMode::kSFB, "sfb"},
                                                 {SchemeMode::kAllreduce, "allreduce"},
                                                 {SchemeMode::kAuto, "auto"},
                                                 {SchemeMode::kFactorPush, "factor-push"}}};
constexpr NameTable<CostRule, 3> kCostRules{
    {{CostRule::kBytes, "bytes"}, {CostRule::kTime, "time"}, {CostRule::kSchedule, "schedule"}}};

}  // namespace

SchemeMode parseSchemeMode(const std::string& name) {
  if (name == "adam") {  // the scheme's name until 2026-11, after Project Adam; Adam is an optimizer
    throw OptionError(
        "{scheme=adam}: the factor-push scheme (after Project Adam) is now called {scheme=factor-push}; for the Adam "
        "optimizer, give {optimizer=adam}");
  }
  if (const SchemeMode* mode = valueIn(kSchemeModes, name)) return *mode;
  throw OptionError("{scheme=" + name + "}: use " + namesIn(kSchemeModes));
}

CostRule parseCostRule(const std::string& name) {
  if (const CostRule* rule = valueIn(kCostRules, name)) return *rule;
  throw OptionError("{cost_model=" + name + "}: use " + namesIn(kCostRules));
}

const char* schemeModeName(SchemeMode mode) { return nameIn(kSchemeModes, mode); }

const char* costRuleName(CostRule rule) { return nameIn(kCostRules, rule); }

WireShares WireShares::of(WireFormat pushes, WireFormat updates, WireFormat factors) {
  const auto share = [](WireFormat w) { return static_cast<double>(wireBytesPerFloat(w)) / sizeof(float); };
  return WireShares{CostModel::psWireShare(pushes, updates), share(pushes), share(factors)};
}

WireShares WireShares::of(WireFormat wire, bool error_feedback) {
  return of(wire, wire, factorWireOf(wire, error_feedback));
}

namespace {

// What every layer's plan shares: the cluster's sizes and the request.
struct Planning {
  const PlanRequest& req;
  int P1, P2;
  PsRole role;        // a typical worker's, for Table 1's per-node counts
  bool time_rule;     // the schedule rule starts from the time rule's choice
  bool allreduce_ok;  // the collectives run among all ranks: every rank must train
  bool rows_ok;       // sparse rows for the layers that have them
};

// Whether allreduce's cost `a` wins against `rival`: strictly less, or no more when ties go
// to it (the two sides' formulas may differ in the last bits for equal bytes).
bool beats(double a, double rival, bool on_tie) { return on_tie ? a <= rival * (1 + 1e-9) : a < rival; }

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

// The byte counts of each scheme and the cheapest by bytes. A synchronous step waits for
// its busiest node: under PS with every rank a worker that is a shard's node
// (2*M*N*(P1+P2-2)/P2), equal to the ring when every rank holds a shard, more when shards
// are fewer than workers. That is where allreduce wins, and on the tie with
// PlanRequest::allreduce_on_ties.
// The floats of what `choice` moves: PS at its busiest node.
double floatsOf(const LayerPlan& p, Scheme choice, double ps_busiest) {
  if (choice == Scheme::kSFB) return p.sfb_floats;
  if (choice == Scheme::kAllreduce) return p.allreduce_floats;
  return ps_busiest;
}

// Sparse rows, where the layer has them: the touched rows and their indices to every other
// worker. Chosen when strictly fewer bytes (time: seconds) than the dense choice.
void costOfRows(LayerPlan& p, const LayerInfo& layer, double ps_busiest, const Planning& c) {
  if (!c.rows_ok || layer.rows_touched <= 0 || layer.tensors.size() != 1 || layer.tensors[0].shape.size() != 2) return;
  // A worker whose step touched most rows sends the whole gradient in one message: it must fit.
  if (static_cast<double>(layer.numel()) * sizeof(float) + 8 > static_cast<double>(kMaxPayloadBytes)) return;
  p.rows_floats = CostModel::rowsFloats(layer.rows_touched, layer.tensors[0].shape[1], c.P1);
  if (p.rows_floats < floatsOf(p, p.bytes_choice, ps_busiest)) p.bytes_choice = Scheme::kRows;
  if (!c.req.rates.known()) {
    p.time_choice = p.bytes_choice;
    return;
  }
  const double bw = c.req.rates.bandwidth_bytes_per_s;
  p.rows_seconds = p.rows_floats / 2 * sizeof(float) / bw;
  const double rival = p.time_choice == Scheme::kSFB         ? p.sfb_seconds
                       : p.time_choice == Scheme::kAllreduce ? p.allreduce_seconds
                                                             : ps_busiest / 2 * sizeof(float) / bw;
  if (p.rows_seconds < rival) p.time_choice = Scheme::kRows;
}

void costInBytes(LayerPlan& p, const LayerInfo& layer, bool fc, std::int64_t K, double ps_busiest, const Planning& c) {
  p.ps_floats = CostModel::psFloats(layer.numel(), 1, c.P1, c.P2, c.role) * c.req.ps_wire_share;
  if (fc) {
    // The bias rides along with the factors (its gradient is the sum of U's rows).
    p.sfb_floats = CostModel::sfbFloats(layer.M, layer.N, c.P1, K) * c.req.sfb_wire_share;
    p.factor_push_floats = CostModel::factorPushFloats(layer.M, layer.N, K);
    p.bytes_choice = p.sfb_floats <= p.ps_floats ? Scheme::kSFB : Scheme::kPS;
  }
  if (!c.allreduce_ok) return;
  p.allreduce_floats = CostModel::allreduceFloats(layer.numel(), 1, c.P1) * c.req.allreduce_wire_share;
  const double best = floatsOf(p, p.bytes_choice, ps_busiest);
  if (beats(p.allreduce_floats, best, c.req.allreduce_on_ties && p.bytes_choice == Scheme::kPS)) {
    p.bytes_choice = Scheme::kAllreduce;
  }
}

// The same in seconds, SFB's reconstruction GEMM included, where the rates are known.
void costInTime(LayerPlan& p, const LayerInfo& layer, bool fc, std::int64_t K, double ps_busiest, const Planning& c) {
  if (!c.req.rates.known()) {
    p.time_choice = p.bytes_choice;
    return;
  }
  const double bw = c.req.rates.bandwidth_bytes_per_s;
  // A node sends and receives half of the Table 1 count each; the link is full duplex.
  p.ps_seconds = p.ps_floats / 2 * sizeof(float) / bw;
  if (fc) {
    const double extra_flops = 2.0 * layer.M * layer.N * K * (c.P1 - 1);
    p.sfb_seconds = p.sfb_floats / 2 * sizeof(float) / bw + extra_flops / c.req.rates.gemm_flops_per_s;
    p.time_choice = p.sfb_seconds < p.ps_seconds ? Scheme::kSFB : Scheme::kPS;
  }
  if (!c.allreduce_ok) return;
  p.allreduce_seconds = p.allreduce_floats / 2 * sizeof(float) / bw;
  const double rival = p.time_choice == Scheme::kSFB ? p.sfb_seconds : ps_busiest / 2 * sizeof(float) / bw;
  if (beats(p.allreduce_seconds, rival, c.req.allreduce_on_ties && p.time_choice == Scheme::kPS)) {
    p.time_choice = Scheme::kAllreduce;
  }
}

Scheme chosen(const LayerPlan& p, bool fc, const Planning& c) {
  switch (c.req.mode) {
    case SchemeMode::kPS:
      return Scheme::kPS;
    case SchemeMode::kSFB:
      return fc ? Scheme::kSFB : Scheme::kPS;
    case SchemeMode::kFactorPush:
      return fc ? Scheme::kFactorPush : Scheme::kPS;
    // Even with one worker: the collectives are trivial, but the engine path is the
    // same, which is what a one-rank benchmark of the designs measures.
    case SchemeMode::kAllreduce:
      return Scheme::kAllreduce;
    case SchemeMode::kAuto:
      break;
  }
  return c.time_rule ? p.time_choice : p.bytes_choice;
}

// Why the layer goes by its scheme, with the figures the choice compared.
std::string reasonFor(const LayerPlan& p, const LayerInfo& layer, bool fc, const Planning& c) {
  const SchemeMode mode = c.req.mode;
  if (c.P1 == 1 && mode != SchemeMode::kAllreduce) return "one worker: nothing to exchange";
  if (mode != SchemeMode::kAuto) {
    if (fc || mode == SchemeMode::kAllreduce || mode == SchemeMode::kPS) {
      return std::string("forced by scheme ") + schemeModeName(mode);
    }
    return layer.kind == LayerKind::kFC ? "FC, but its factors cannot be captured" : "not FC: no sufficient factors";
  }
  std::string why;
  if (!fc && !c.allreduce_ok) {
    why = "not FC: no sufficient factors";
  } else if (!fc) {
    why = c.time_rule ? format("not FC; time: allreduce %.4f s vs ps %.4f s", p.allreduce_seconds, p.ps_seconds)
                      : format("not FC; bytes: allreduce %.0f floats vs ps %.0f", p.allreduce_floats, p.ps_floats);
  } else if (c.time_rule) {
    const double network = p.sfb_floats * 2 / c.req.rates.bandwidth_bytes_per_s;
    why = format("time: sfb %.4f s (%.4f network + %.4f reconstruction) vs ps %.4f s", p.sfb_seconds, network,
                 p.sfb_seconds - network, p.ps_seconds);
    if (c.allreduce_ok) why += format(" vs allreduce %.4f s", p.allreduce_seconds);
  } else {
    why = format("bytes: sfb %.0f floats vs ps %.0f", p.sfb_floats, p.ps_floats);
    if (c.allreduce_ok) why += format(" vs allreduce %.0f", p.allreduce_floats);
  }
  if (p.rows_floats > 0) {
    why += c.time_rule ? format(" vs rows %.4f s", p.rows_seconds)
                       : format(" vs rows %.0f floats (%lld rows touched)", p.rows_floats,
                                static_cast<long long>(layer.rows_touched));
  }
  if (c.req.ps_wire_share != 1.0 && c.P1 > 1) {
    why += format(" (a 16-bit wire: ps x%.2f, sfb x%.2f, allreduce x%.2f of fp32's bytes)", c.req.ps_wire_share,
                  c.req.sfb_wire_share, c.req.allreduce_wire_share);
  }
  return why;
}

}  // namespace

std::vector<LayerPlan> planSchemes(const ModelInfo& model, const ClusterInfo& cluster, const PlanRequest& req) {
  const Planning c{req,
                   cluster.workers(),
                   cluster.shards(),
                   cluster.hasShard(0) ? PsRole::kServerAndWorker : PsRole::kWorkerOnly,
                   req.rule != CostRule::kBytes,
                   cluster.workers() > 1 && cluster.serverOnly() == 0,
                   req.sparse_rows && cluster.workers() > 1 && cluster.serverOnly() == 0};
  if (c.time_rule && req.mode == SchemeMode::kAuto && !req.rates.known()) {
    throw InputError(
        detail::cat("the ", costRuleName(req.rule), " cost model needs the link bandwidth and the GEMM rate"));
  }
  if (req.mode == SchemeMode::kAllreduce && cluster.serverOnly() > 0) {
    throw OptionError("{scheme=allreduce} needs every rank to train: drop {server_ranks}");
  }
  std::vector<LayerPlan> plans;
  for (const auto& layer : model.layers) {
    LayerPlan p;
    // Factor rows per worker: an input [batch, d1, ..., N] makes batch * d1 * ... rows.
    const std::int64_t K = req.batch * layer.rows_per_example;
    const bool fc = layer.kind == LayerKind::kFC && layer.factorable && c.P1 > 1;
    const double ps_busiest =
        CostModel::psFloats(layer.numel(), 1, c.P1, c.P2, PsRole::kServerAndWorker) * req.ps_wire_share;
    costInBytes(p, layer, fc, K, ps_busiest, c);
    costInTime(p, layer, fc, K, ps_busiest, c);
    costOfRows(p, layer, ps_busiest, c);
    p.scheme = chosen(p, fc, c);
    p.reason = reasonFor(p, layer, fc, c);
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
