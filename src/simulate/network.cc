#include "simulate/network.h"

#include <algorithm>

namespace poseidon::sim {

Network::Network(int nodes, const SimConfig& c)
    : rate_(c.bandwidth_bytes_per_s),
      latency_(c.latency_s),
      switch_rate_(c.switch_bytes_per_s),
      by_priority_(c.effectiveOrder() == Order::kPriority),
      queues_(nodes),
      busy_(nodes, false),
      downlink_clock_(nodes, 0.0),
      sent_(nodes, 0.0),
      received_(nodes, 0.0) {}

void Network::send(double now, const Message& m, EventQueue& events) {
  int id;
  if (free_.empty()) {
    id = static_cast<int>(slots_.size());
    slots_.push_back(m);
  } else {
    id = free_.back();
    free_.pop_back();
    slots_[id] = m;
  }
  queues_[m.from].push({by_priority_ ? m.layer : 0, seq_++, id});
  if (!busy_[m.from]) start(m.from, now, events);
}

void Network::nicFree(int node, double now, EventQueue& events) {
  busy_[node] = false;
  if (!queues_[node].empty()) start(node, now, events);
}

void Network::start(int node, double now, EventQueue& events) {
  const int id = queues_[node].top().id;
  queues_[node].pop();
  busy_[node] = true;
  const Message& m = slots_[id];
  const double up_end = now + m.bytes / rate_;
  double end = up_end;
  if (switch_rate_ > 0) {
    switch_clock_ = std::max(switch_clock_, now) + m.bytes / switch_rate_;
    end = std::max(end, switch_clock_);
  }
  double& down = downlink_clock_[m.to];
  down = std::max(down, now) + m.bytes / rate_;
  end = std::max(end, down);
  events.push(up_end, kNicFree, node);
  events.push(end + latency_, kDelivered, id);
  ++messages_;
  if (m.iter >= count_from_) {
    sent_[m.from] += m.bytes;
    received_[m.to] += m.bytes;
  }
}

}  // namespace poseidon::sim
