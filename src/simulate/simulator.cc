#include "simulate/simulator.h"

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "poseidon/errors.h"

#include "simulate/network.h"
#include "simulate/sync_plan.h"

namespace poseidon::sim {

namespace {

enum SimEvent {
  kComputeDone = kFirstSimulatorEvent,  // a: node
  kSyncStart,                           // a: node, b: layer, c: iteration
  kStepped,                             // a: shard, b: pair, c: iteration
  kReconstructed,                       // a: node, b: layer, c: iteration
  kFactorsStart,                        // a: node, b: layer, c: iteration
  kDeviceReconstructed,                 // a: node, b: layer, c: iteration
};

// Bytes of `floats` floats as `wire` carries them (a PS push or pull in 16 bits: issue 38).
double bytesOf(double floats, WireFormat wire = WireFormat::kFp32) {
  return floats * static_cast<double>(wireBytesPerFloat(wire));
}
// Seconds to process `amount` at `rate`; a rate of 0 is not modelled.
double cost(double amount, double rate) { return rate > 0 ? amount / rate : 0.0; }

// One node: its compute cursor (iteration, direction, layer), what its device is doing,
// and per layer how far its syncs have come.
struct NodeState {
  int iter = 0;
  bool backward = false;
  int layer = 0;
  bool waiting = false;
  bool busy = false;                                // the device runs a layer or a reconstruction
  std::deque<std::pair<int, int>> reconstructions;  // (layer, iteration) due on the device
  double wait_since = 0;
  double iter_start = 0;
  std::vector<int> synced;                  // last iteration whose sync of the layer ended
  std::vector<int> backward_done;           // last iteration whose backward of the layer ended
  std::vector<int> remaining;               // PS pairs still to come back
  std::vector<std::array<int, 2>> factors;  // SFB factors received, by iteration parity
  double server_clock = 0, gemm_clock = 0;
  // Of the last measured iteration.
  std::vector<double> backward_end, sync_end, wait;
};

// The state of one run: built per call of simulate(), so runs share nothing.
class Simulation {
 public:
  Simulation(const SimModel& model, const SimConfig& c)
      : c_(c),
        N_(c.nodes),
        L_(static_cast<int>(model.layers.size())),
        T_(c.iterations),
        times_(layerTimes(model, c.batch, c.device_flops_per_s)),
        sync_(planSync(model, c)),
        net_(c.nodes, c),
        nodes_(c.nodes),
        iter_end_(c.iterations, 0.0),
        layer_bytes_(model.layers.size(), 0.0) {
    for (int l = 0; l < L_; ++l) {
      pair_base_.push_back(static_cast<int>(pair_layer_.size()));
      for (std::size_t k = 0; k < sync_[l].pieces.size(); ++k) pair_layer_.push_back(l);
    }
    pair_count_.assign(pair_layer_.size(), 0);
    for (auto& n : nodes_) {
      n.synced.assign(L_, -1);
      n.backward_done.assign(L_, -1);
      n.remaining.assign(L_, 0);
      n.factors.assign(L_, {0, 0});
      n.backward_end.assign(L_, 0);
      n.sync_end.assign(L_, 0);
      n.wait.assign(L_, 0);
    }
    net_.countFrom(1);
  }

  SimResult run(const SimModel& model);

 private:
  bool overlap() const { return c_.system != System::kPs; }
  bool measured(int iter) const { return iter == T_ - 1; }
  void dispatch(const Event& e);
  void proceed(int node, double now);
  void startCompute(int node, double now);
  void computeDone(int node, double now);
  bool ready(int node, int layer, int iter) const;
  void tryForward(int node, double now);
  void backwardDone(int node, int layer, double now);
  void scheduleSync(int node, int layer, int iter, double now);
  void startSync(int node, int layer, int iter, double now);
  void sendFactors(int node, int layer, int iter, double now);
  void broadcastFactors(int node, int layer, int iter, double now);
  void contribute(int shard, int pair, int iter, double now);
  void stepped(int shard, int pair, int iter, double now);
  void pairArrived(int node, int layer, int iter, double now);
  void factorsArrived(int node, int layer, int iter, double now);
  void synced(int node, int layer, int iter, double now);
  void delivered(int id, double now);
  double hostCpuBound(const SimModel& model, double compute_s) const;

  SimConfig c_;
  int N_, L_, T_;
  std::vector<LayerTimes> times_;
  std::vector<LayerSync> sync_;
  Network net_;
  EventQueue events_;
  std::vector<NodeState> nodes_;
  std::vector<int> pair_base_, pair_layer_, pair_count_;
  std::vector<double> iter_end_;
  std::vector<double> layer_bytes_;  // sent in the measured iterations, all nodes
};

void Simulation::dispatch(const Event& e) {
  switch (e.type) {
    case kNicFree:
      net_.nicFree(e.a, e.time, events_);
      break;
    case kDelivered:
      delivered(e.a, e.time);
      break;
    case kComputeDone:
      computeDone(e.a, e.time);
      break;
    case kSyncStart:
      startSync(e.a, e.b, e.c, e.time);
      break;
    case kStepped:
      stepped(e.a, e.b, e.c, e.time);
      break;
    case kReconstructed:
      synced(e.a, e.b, e.c, e.time);
      break;
    case kFactorsStart:
      broadcastFactors(e.a, e.b, e.c, e.time);
      break;
    case kDeviceReconstructed:
      synced(e.a, e.b, e.c, e.time);  // still busy: synced() must not start anything
      nodes_[e.a].busy = false;
      proceed(e.a, e.time);
      break;
  }
}

// The device's next task: a reconstruction that is due (it runs between two layers, as a
// kernel queued on the same device), else the layer the node's cursor points at.
void Simulation::proceed(int node, double now) {
  NodeState& n = nodes_[node];
  if (!n.reconstructions.empty()) {
    const auto [layer, iter] = n.reconstructions.front();
    n.reconstructions.pop_front();
    n.busy = true;
    events_.push(now + cost(sync_[layer].reconstruct_flops, c_.gemmRate()), kDeviceReconstructed, node, layer, iter);
    return;
  }
  if (n.iter >= T_) return;
  if (n.backward) return startCompute(node, now);
  tryForward(node, now);
}

// Begins the layer the node's cursor points at; its end is a kComputeDone.
void Simulation::startCompute(int node, double now) {
  NodeState& n = nodes_[node];
  const LayerTimes& t = times_[n.layer];
  n.busy = true;
  if (n.backward && sync_[n.layer].scheme == Scheme::kSFB) {
    // U = dL/dy exists once the layer above is done: the factors leave before this
    // layer's own backward step (the sync starts earlier than a PS layer's can).
    sendFactors(node, n.layer, n.iter, now);
  }
  events_.push(now + (n.backward ? t.backward_s : t.forward_s), kComputeDone, node);
}

bool Simulation::ready(int node, int layer, int iter) const {
  if (iter == 0) return true;
  const NodeState& n = nodes_[node];
  if (overlap()) return n.synced[layer] >= iter - 1;
  // Naive PS: the iteration starts when every layer is back.
  return std::all_of(n.synced.begin(), n.synced.end(), [&](int s) { return s >= iter - 1; });
}

void Simulation::tryForward(int node, double now) {
  NodeState& n = nodes_[node];
  if (!ready(node, n.layer, n.iter)) {
    if (!n.waiting) n.wait_since = now;
    n.waiting = true;
    return;
  }
  if (n.waiting && measured(n.iter)) n.wait[n.layer] = now - n.wait_since;
  n.waiting = false;
  if (n.layer == 0) n.iter_start = now;
  startCompute(node, now);
}

// Moves the cursor past the layer just computed; the device stays busy until proceed().
void Simulation::computeDone(int node, double now) {
  NodeState& n = nodes_[node];
  if (!n.backward) {
    if (n.layer + 1 < L_)
      ++n.layer;
    else
      n.backward = true;
  } else {
    backwardDone(node, n.layer, now);
    if (n.layer > 0) {
      --n.layer;
    } else {
      // Naive PS: everything is sent now, in the order the gradients were produced.
      if (!overlap()) {
        for (int l = L_ - 1; l >= 0; --l) scheduleSync(node, l, n.iter, now);
      }
      n.backward = false;
      ++n.iter;
    }
  }
  n.busy = false;
  proceed(node, now);
}

void Simulation::backwardDone(int node, int layer, double now) {
  NodeState& n = nodes_[node];
  n.backward_done[layer] = n.iter;
  if (measured(n.iter)) n.backward_end[layer] = now - n.iter_start;
  if (N_ == 1) return synced(node, layer, n.iter, now);                                      // nothing to exchange
  if (sync_[layer].scheme == Scheme::kSFB) return factorsArrived(node, layer, n.iter, now);  // weight released
  if (overlap()) scheduleSync(node, layer, n.iter, now);                                     // WFBP
}

// A node with several devices first sums their gradients.
void Simulation::scheduleSync(int node, int layer, int iter, double now) {
  const double floats = static_cast<double>(sync_[layer].floats);
  const double delay = cost(bytesOf(floats) * (c_.devices_per_node - 1), c_.reduce_bytes_per_s);
  if (delay > 0) return events_.push(now + delay, kSyncStart, node, layer, iter);
  startSync(node, layer, iter, now);
}

// PS: each KV pair to its shard; the co-located shard's pair is handed over in place.
void Simulation::startSync(int node, int layer, int iter, double now) {
  const auto& pieces = sync_[layer].pieces;
  nodes_[node].remaining[layer] = static_cast<int>(pieces.size());
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const int pair = pair_base_[layer] + static_cast<int>(k);
    if (pieces[k].shard == node) {
      contribute(node, pair, iter, now);
    } else {
      const double bytes = bytesOf(pieces[k].floats, c_.wire);
      const Message push{node, pieces[k].shard, bytes, MessageKind::kPush, layer, pair, iter};
      net_.send(now, push, events_);
      if (iter >= 1) layer_bytes_[layer] += push.bytes;
    }
  }
}

// A node with several devices first stacks their factors.
void Simulation::sendFactors(int node, int layer, int iter, double now) {
  const double bytes = bytesOf(sync_[layer].factor_floats);
  const double delay = cost(bytes * (c_.devices_per_node - 1), c_.reduce_bytes_per_s);
  if (delay > 0) return events_.push(now + delay, kFactorsStart, node, layer, iter);
  broadcastFactors(node, layer, iter, now);
}

void Simulation::broadcastFactors(int node, int layer, int iter, double now) {
  const double bytes = bytesOf(sync_[layer].factor_floats, c_.factorWire());  // kFactors16, fp32 with error feedback
  for (int peer = 0; peer < N_; ++peer) {
    if (peer == node) continue;
    net_.send(now, {node, peer, bytes, MessageKind::kFactors, layer, 0, iter}, events_);
    if (iter >= 1) layer_bytes_[layer] += bytes;
  }
}

// The shard's server thread sums each contribution as it comes (one at a time), then,
// with all N in (BSP), applies the step and sends the fresh values back.
void Simulation::contribute(int shard, int pair, int iter, double now) {
  NodeState& s = nodes_[shard];
  const double bytes = bytesOf(sync_[pair_layer_[pair]].pieces[pair - pair_base_[pair_layer_[pair]]].floats);
  s.server_clock = std::max(s.server_clock, now) + cost(bytes, c_.reduce_bytes_per_s);
  if (++pair_count_[pair] < N_) return;
  pair_count_[pair] = 0;
  s.server_clock += cost(bytes, c_.reduce_bytes_per_s);
  events_.push(s.server_clock, kStepped, shard, pair, iter);
}

void Simulation::stepped(int shard, int pair, int iter, double now) {
  const int layer = pair_layer_[pair];
  const double bytes = bytesOf(sync_[layer].pieces[pair - pair_base_[layer]].floats, c_.wire);
  for (int node = 0; node < N_; ++node) {
    if (node == shard) {
      pairArrived(node, layer, iter, now);
    } else {
      net_.send(now, {shard, node, bytes, MessageKind::kPull, layer, pair, iter}, events_);
      if (iter >= 1) layer_bytes_[layer] += bytes;
    }
  }
}

void Simulation::pairArrived(int node, int layer, int iter, double now) {
  if (--nodes_[node].remaining[layer] == 0) synced(node, layer, iter, now);
}

// Counts a peer's factors, or (from backwardDone) the release of the node's own weight;
// with all N - 1 peers' factors and the weight released, reconstruct and step.
void Simulation::factorsArrived(int node, int layer, int iter, double now) {
  NodeState& n = nodes_[node];
  int& count = n.factors[layer][iter & 1];
  if (n.backward_done[layer] < iter || count < N_ - 1) return;
  count = 0;
  if (c_.reconstruct_on_device) {
    n.reconstructions.emplace_back(layer, iter);
    if (!n.busy) proceed(node, now);
    return;
  }
  n.gemm_clock = std::max(n.gemm_clock, now) + cost(sync_[layer].reconstruct_flops, c_.gemmRate());
  events_.push(n.gemm_clock, kReconstructed, node, layer, iter);
}

void Simulation::delivered(int id, double now) {
  const Message m = net_.message(id);
  net_.release(id);
  switch (m.kind) {
    case MessageKind::kPush:
      contribute(m.to, m.item, m.iter, now);
      break;
    case MessageKind::kPull:
      pairArrived(m.to, m.layer, m.iter, now);
      break;
    case MessageKind::kFactors:
      ++nodes_[m.to].factors[m.layer][m.iter & 1];
      factorsArrived(m.to, m.layer, m.iter, now);
      break;
  }
}

void Simulation::synced(int node, int layer, int iter, double now) {
  NodeState& n = nodes_[node];
  n.synced[layer] = iter;
  iter_end_[iter] = std::max(iter_end_[iter], now);
  if (measured(iter)) n.sync_end[layer] = now - n.iter_start;
  if (n.waiting && !n.busy) proceed(node, now);
}

// The busiest host's CPU seconds per iteration over its cores: its nodes' devices'
// compute threads (the profile's measured CPU time, else the compute's wall time) and the
// communication's work for the bytes they send and receive. A bound, as a link's rate is: the schedule
// above does not slow a layer that shares its core with the stack, so the iteration is
// the larger of the two (docs/SIMULATOR.md).
double Simulation::hostCpuBound(const SimModel& model, double compute_s) const {
  if (c_.host_cores <= 0) return 0;
  const double cpu =
      model.cpu_per_iteration_s >= 0 && model.profile_batch > 0
          ? model.cpu_per_iteration_s * static_cast<double>(c_.batch) / static_cast<double>(model.profile_batch)
          : compute_s;
  // SFB's reconstruction is CPU work too where the devices are the host's cores: measured
  // profiles (this project trains on CPUs), not the built-in models' GPUs.
  double reconstruct = 0;
  for (const auto& s : sync_) reconstruct += model.profile_batch > 0 ? cost(s.reconstruct_flops, c_.gemmRate()) : 0;
  double busiest = 0;
  for (int first = 0; first < N_; first += c_.nodes_per_host) {
    double work = 0;
    for (int node = first; node < std::min(N_, first + c_.nodes_per_host); ++node) {
      // The rate covers a byte's sending and its receiving: half of each side's bytes here,
      // so traffic between hosts is charged to both, and a host's own traffic once.
      const double bytes = (net_.sent()[node] + net_.received()[node]) / 2 / (T_ - 1);
      work += c_.devices_per_node * cpu + reconstruct + cost(bytes, c_.stack_bytes_per_s);
    }
    busiest = std::max(busiest, work);
  }
  return busiest / c_.host_cores;
}

SimResult Simulation::run(const SimModel& model) {
  for (int node = 0; node < N_; ++node) proceed(node, 0.0);
  while (!events_.empty()) dispatch(events_.pop());

  SimResult r;
  r.system = c_.system;
  r.order = c_.effectiveOrder();
  r.nodes = N_;
  r.devices_per_node = c_.devices_per_node;
  r.batch = c_.batch;
  for (const auto& t : times_) r.compute_s += t.forward_s + t.backward_s;
  r.schedule_s = (iter_end_[T_ - 1] - iter_end_[0]) / (T_ - 1);
  r.cpu_bound_s = hostCpuBound(model, r.compute_s);
  r.iteration_s = std::max(r.schedule_s, r.cpu_bound_s);
  r.images_per_s = static_cast<double>(N_) * c_.devices_per_node * c_.batch / r.iteration_s;
  const double window = r.iteration_s * (T_ - 1) * c_.bandwidth_bytes_per_s;
  for (int node = 0; node < N_; ++node) {
    r.uplink_utilisation.push_back(net_.sent()[node] / window);
    r.downlink_utilisation.push_back(net_.received()[node] / window);
  }
  for (int l = 0; l < L_; ++l) {
    LayerReport lr;
    lr.name = model.layers[l].info.name;
    lr.scheme = sync_[l].scheme;
    lr.params = static_cast<double>(sync_[l].floats);
    lr.forward_s = times_[l].forward_s;
    lr.backward_s = times_[l].backward_s;
    for (const auto& n : nodes_) {
      lr.backward_end_s = std::max(lr.backward_end_s, n.backward_end[l]);
      lr.sync_end_s = std::max(lr.sync_end_s, n.sync_end[l]);
      lr.forward_wait_s = std::max(lr.forward_wait_s, n.wait[l]);
    }
    lr.bytes_sent_per_node = layer_bytes_[l] / N_ / (T_ - 1);
    if (lr.scheme == Scheme::kSFB) ++r.sfb_layers;
    r.layers.push_back(lr);
  }
  r.messages = net_.messages();
  return r;
}

}  // namespace

SimResult simulate(const SimModel& model, const SimConfig& config) {
  config.validate();
  if (model.layers.empty()) throw InputError("the model has no layers with parameters");
  Simulation s(model, config);
  return s.run(model);
}

}  // namespace poseidon::sim
