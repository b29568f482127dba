// Hand-sized models and networks for the simulator's tests: with a link of 2 MiB/s a 2 MiB
// KV pair takes exactly one second on the wire, so expected times can be written down
// message by message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simulate/sim_config.h"
#include "simulate/sim_model.h"

namespace poseidon::sim {

constexpr double kPairBytes = 2 << 20;
constexpr std::int64_t kPairFloats = (2 << 20) / 4;
constexpr std::int64_t kBatch = 32;

// A layer of `floats` parameters in one tensor, with measured times (profile style).
inline SimLayer layer(const std::string& name, std::int64_t floats, double fwd, double bwd) {
  SimLayer l;
  l.info.name = name;
  l.info.kind = LayerKind::kConv;
  l.info.tensors = {{"weight", {floats}}};
  l.forward_s = fwd;
  l.backward_s = bwd;
  return l;
}

// An M x N FC layer (weight only), which SFB can sync.
inline SimLayer fcLayer(const std::string& name, std::int64_t M, std::int64_t N, double fwd, double bwd) {
  SimLayer l = layer(name, M * N, fwd, bwd);
  l.info.kind = LayerKind::kFC;
  l.info.M = M;
  l.info.N = N;
  return l;
}

inline SimModel model(std::vector<SimLayer> layers) {
  SimModel m;
  m.name = "hand";
  m.profile_batch = kBatch;
  m.layers = std::move(layers);
  return m;
}

inline SimConfig config(System system, int nodes) {
  SimConfig c;
  c.system = system;
  c.nodes = nodes;
  c.batch = kBatch;
  c.bandwidth_bytes_per_s = kPairBytes;  // one pair per second
  c.iterations = 4;
  return c;
}

}  // namespace poseidon::sim
