// A discrete-event simulation of BSP training iterations on N nodes (ATC'17's setting):
// each node computes forward and backward layer by layer; each layer's sync (its KV pairs
// to their shards and the fresh values back, or its sufficient factors to every peer and
// the reconstruction) runs on the network and the nodes' servers; the next forward of a
// layer waits for that layer's sync (WFBP), or for all of them (naive PS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/cost_model.h"
#include "simulate/sim_config.h"
#include "simulate/sim_model.h"

namespace poseidon::sim {

struct LayerReport {
  std::string name;
  Scheme scheme = Scheme::kPS;
  double params = 0;
  double forward_s = 0, backward_s = 0;
  // In the last measured iteration, from its start, the latest node: when the layer's
  // backward ended and when its sync ended.
  double backward_end_s = 0, sync_end_s = 0;
  // How long that iteration's forward waited for this layer's previous sync, the longest
  // over nodes: the layers with a wait are the iteration's critical path.
  double forward_wait_s = 0;
  double bytes_sent_per_node = 0;  // per iteration, mean over nodes
};

struct SimResult {
  System system = System::kPoseidon;
  Order order = Order::kPriority;
  int nodes = 1, devices_per_node = 1;
  std::int64_t batch = 0;   // per device
  double compute_s = 0;     // forward + backward of one device, nothing else
  double iteration_s = 0;   // steady state, mean over the measured iterations
  double schedule_s = 0;    // the event schedule's iteration, before the host CPU bound
  double cpu_bound_s = 0;   // the busiest host's CPU work per iteration / its cores (0: off)
  double images_per_s = 0;  // the whole cluster
  std::vector<double> uplink_utilisation, downlink_utilisation;  // per node, 0..1
  std::vector<LayerReport> layers;
  int sfb_layers = 0;
  std::int64_t messages = 0;  // all simulated iterations
};

SimResult simulate(const SimModel& model, const SimConfig& config);

}  // namespace poseidon::sim
