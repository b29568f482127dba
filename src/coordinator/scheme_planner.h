// HybComm's per-layer choice (ATC'17 §3.3, Algorithm 1): for each layer, the scheme that
// moves the fewest bytes ("bytes" rule, the paper's) or that is predicted to take the least
// time ("time" rule). The time rule also charges SFB for what the byte count leaves out on
// a CPU: reconstructing the summed gradient is a GEMM of 2*M*N*(P1*K) flops on every
// worker, in place of the local 2*M*N*K weight-gradient GEMM it saves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/cluster_info.h"
#include "coordinator/cost_model.h"
#include "poseidon/model_info.h"

namespace poseidon {

enum class SchemeMode { kPS, kSFB, kAuto, kFactorPush, kAllreduce };
// kSchedule compares whole plans, not layers: the combination of per-layer choices whose
// simulated iteration (WFBP's overlap with the backward and the next forward, the order on
// the link, the reconstruction on the device) is shortest. It needs measured layer times,
// so it lives in the simulator (sim::chooseBySchedule); planSchemes gives the time rule's
// per-layer choice for it, the search's starting point.
enum class CostRule { kBytes, kTime, kSchedule };

// Throw OptionError on an unknown name.
SchemeMode parseSchemeMode(const std::string& name);
CostRule parseCostRule(const std::string& name);
const char* schemeModeName(SchemeMode mode);
const char* costRuleName(CostRule rule);

// PlanRequest's shares of fp32's bytes for PS, allreduce and SFB layers (a 16-bit wire).
struct WireShares {
  double ps = 1.0;
  double allreduce = 1.0;
  double sfb = 1.0;

  // PS pushes and allreduce sums as `pushes`, the PS's way back as `updates`, SFB factors as
  // `factors`.
  static WireShares of(WireFormat pushes, WireFormat updates, WireFormat factors);
  // BSP server mode on `wire`: the way back as the pushes; factors by factorWireOf.
  static WireShares of(WireFormat wire, bool error_feedback);
};

struct PlanRequest {
  SchemeMode mode = SchemeMode::kAuto;
  CostRule rule = CostRule::kBytes;
  std::int64_t batch = 32;  // K, per worker
  PlatformRates rates;
  // How PS layers travel (issue 38): their floats count at this share of fp32's bytes
  // (CostModel::psWireShare).
  double ps_wire_share = 1.0;
  // Allreduce layers' floats count at this share of fp32's bytes (0.5 when their sums travel
  // in 16 bits: sum16.h).
  double allreduce_wire_share = 1.0;
  // SFB layers' factors count at this share of fp32's bytes (0.5 in 16 bits: comm/factors.h).
  double sfb_wire_share = 1.0;
  // Auto gives a layer whose allreduce moves no more bytes than PS to allreduce (a tie when
  // every node holds a shard): its buckets fuse small layers into a few collectives where
  // PS sends a message per pair, which costs CPU beyond the bytes (googlenet, 4 ranks at
  // 10 gbit: 313.6 images/s against 270.4, docs/benchmarks/allreduce-on-ties.txt). Off,
  // a tie keeps PS: SSP and straggler dropping work on PS layers only, through a node's
  // leaders allreduce measured slower, and the simulator models PS and SFB alone.
  bool allreduce_on_ties = false;
  // A layer with LayerInfo::rows_touched may go by sparse rows (auto, when they move fewer
  // bytes): on flat BSP runs where every rank trains, as allreduce; the schedule rule's
  // simulator does not model them.
  bool sparse_rows = false;

  void setWire(const WireShares& shares) {
    ps_wire_share = shares.ps;
    allreduce_wire_share = shares.allreduce;
    sfb_wire_share = shares.sfb;
  }
};

// One plan per layer of `model`. Only FC layers can go by SFB or factor push, only layers
// with rows_touched by sparse rows (under auto, with PlanRequest::sparse_rows); allreduce needs every
// rank to be a worker; with one worker every layer stays on PS (nobody to exchange with).
// "auto" takes the cheapest; on a tie PS before SFB before allreduce, but allreduce before
// PS with PlanRequest::allreduce_on_ties.
std::vector<LayerPlan> planSchemes(const ModelInfo& model, const ClusterInfo& cluster, const PlanRequest& request);

// The 2015 paper's devices level: `nodes` nodes of `devices` devices each exchange as
// `nodes` workers with a co-located shard each, a worker's batch being its node's whole
// batch (P1 = nodes, K = devices * request.batch): the devices' gradients are summed and
// their factors stacked inside the node before anything crosses the network.
std::vector<LayerPlan> planForNodes(const ModelInfo& model, int nodes, int devices, PlanRequest request);

}  // namespace poseidon
