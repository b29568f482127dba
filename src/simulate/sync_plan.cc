#include "simulate/sync_plan.h"

#include "coordinator/information_book.h"
#include "coordinator/scheme_planner.h"
#include "poseidon/errors.h"
#include "simulate/schedule_rule.h"

namespace poseidon::sim {

namespace {

// Fixed schemes (the schedule rule's trials, or a plan given whole): SFB only where the
// planner offers it, on a factorable FC layer.
std::vector<Scheme> fixedSchemes(const ModelInfo& info, const SimConfig& c) {
  if (c.schemes.size() != info.layers.size()) {
    throw InputError(
        detail::cat("a plan of ", c.schemes.size(), " schemes for a model of ", info.layers.size(), " layers"));
  }
  for (std::size_t l = 0; l < info.layers.size(); ++l) {
    const LayerInfo& layer = info.layers[l];
    if (c.schemes[l] == Scheme::kSFB && !(layer.kind == LayerKind::kFC && layer.factorable)) {
      throw InputError("layer '" + layer.name + "' cannot go by SFB: it is not a factorable FC layer");
    }
  }
  return c.schemes;
}

std::vector<Scheme> schemes(const SimModel& model, const ModelInfo& info, const SimConfig& c) {
  if (c.system == System::kPoseidon && !c.schemes.empty()) return fixedSchemes(info, c);
  if (c.system == System::kPoseidon && c.rule == CostRule::kSchedule) return chooseBySchedule(model, c).schemes;
  PlanRequest req;
  // Only Poseidon chooses per layer; the others send every layer through the PS.
  req.mode = c.system == System::kPoseidon ? SchemeMode::kAuto : SchemeMode::kPS;
  req.rule = c.rule == CostRule::kBytes ? CostRule::kBytes : CostRule::kTime;
  req.rates = PlatformRates{c.bandwidth_bytes_per_s, c.gemmRate()};
  req.batch = c.batch;
  req.setWire(WireShares::of(c.wire, c.error_feedback));
  std::vector<Scheme> out;
  for (const auto& p : planForNodes(info, c.nodes, c.devices_per_node, req)) {
    // Allreduce is not one of the paper's systems: with a shard on every node the planner
    // only ties it with PS (and a tie keeps PS), so this never fires in practice.
    out.push_back(p.scheme == Scheme::kSFB ? Scheme::kSFB : Scheme::kPS);
  }
  return out;
}

// TensorFlow's round-robin placement: tensor t (in model order) on server t mod N.
void coarsePieces(const ModelInfo& info, int nodes, std::vector<LayerSync>& out) {
  int next = 0;
  for (std::size_t l = 0; l < info.layers.size(); ++l) {
    for (const auto& t : info.layers[l].tensors) out[l].pieces.push_back({next++ % nodes, t.numel()});
  }
}

}  // namespace

std::vector<LayerSync> planSync(const SimModel& model, const SimConfig& c) {
  const ModelInfo info = model.info();
  std::vector<LayerSync> out(info.layers.size());
  for (std::size_t l = 0; l < out.size(); ++l) out[l].floats = info.layers[l].numel();
  if (c.nodes == 1) return out;
  const std::vector<Scheme> chosen = schemes(model, info, c);
  const std::int64_t K = c.batch * c.devices_per_node;
  std::vector<bool> on_ps(out.size());
  for (std::size_t l = 0; l < out.size(); ++l) {
    const LayerInfo& layer = info.layers[l];
    out[l].scheme = chosen[l];
    on_ps[l] = chosen[l] == Scheme::kPS;
    if (chosen[l] == Scheme::kSFB) {
      const std::int64_t rows = K * layer.rows_per_example;
      out[l].factor_floats = rows * (layer.M + layer.N);
      out[l].reconstruct_flops =
          2.0 * static_cast<double>(layer.M) * static_cast<double>(layer.N) * static_cast<double>(rows) * (c.nodes - 1);
    }
  }
  if (c.system == System::kCoarse) {
    coarsePieces(info, c.nodes, out);
    return out;
  }
  // The devices level exchanges among nodes: one worker and one shard per node.
  const InformationBook book(info, ClusterInfo(c.nodes, 0, 0), c.pair_bytes, on_ps);
  for (const auto& kv : book.pairs()) out[kv.layer].pieces.push_back({kv.shard, kv.length});
  return out;
}

}  // namespace poseidon::sim
