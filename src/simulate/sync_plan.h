// How each layer is synchronised in a simulated system, taken from the real coordinator:
// the scheme from planForNodes (BestScheme, ATC'17 Algorithm 1, by bytes or time) and the KV
// pairs and their shards from the InformationBook, exactly as a Session would build them.
// The coarse system instead keeps each tensor whole on one shard, round-robin.
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/cost_model.h"
#include "simulate/sim_config.h"
#include "simulate/sim_model.h"

namespace poseidon::sim {

struct Piece {
  int shard = 0;  // the node whose server holds it
  std::int64_t floats = 0;
};

struct LayerSync {
  Scheme scheme = Scheme::kPS;
  std::int64_t floats = 0;         // the layer's parameters
  std::vector<Piece> pieces;       // PS: its KV pairs
  std::int64_t factor_floats = 0;  // SFB: what one node broadcasts, K (M + N)
  double reconstruct_flops = 0;    // SFB: 2 M N K (P1 - 1), beyond the local gradient
};

// One entry per layer of `model`. With one node there is nothing to exchange: no pieces.
std::vector<LayerSync> planSync(const SimModel& model, const SimConfig& config);

}  // namespace poseidon::sim
