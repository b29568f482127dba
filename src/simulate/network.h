// The cluster's network: one full-duplex NIC per node (its uplink and downlink each at the
// link rate) into one switch whose backplane carries at most `switch` bytes/s in all.
//
// Each NIC sends one message at a time, taking the next from its queue by priority (the
// bandwidth manager: lowest layer first) or in arrival order. A message then crosses the
// switch and the receiver's downlink, cut-through: every stage keeps a clock of the work
// queued on it, and a message leaves a stage once that stage has carried its bytes and the
// stage before it has finished. The switch buffers without limit and the sender is never
// slowed by a busy receiver (no TCP back-pressure, no losses), so incast shows up as
// queueing at the receiver's downlink. Each message also pays the one-way latency once.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "simulate/event_queue.h"
#include "simulate/sim_config.h"

namespace poseidon::sim {

// What the receiver does with a message.
enum class MessageKind { kPush, kPull, kFactors };

struct Message {
  int from = 0, to = 0;
  double bytes = 0;
  MessageKind kind = MessageKind::kPush;
  int layer = 0;  // also its priority: lower layers first
  int item = 0;   // the KV pair, for pushes and pulls
  int iter = 0;
};

// Event types the network schedules; the simulator's own start after these.
enum NetworkEvent { kNicFree = 0, kDelivered = 1, kFirstSimulatorEvent = 2 };

class Network {
 public:
  Network(int nodes, const SimConfig& config);

  // Queues `m` at its sender's NIC; starts it at once if the NIC is idle.
  void send(double now, const Message& m, EventQueue& events);
  // kNicFree for `node`: its NIC has sent a message; start the next.
  void nicFree(int node, double now, EventQueue& events);
  // The message a kDelivered event names; release() its slot once handled.
  const Message& message(int id) const { return slots_[id]; }
  void release(int id) { free_.push_back(id); }

  // Bytes each node's NIC sent / received, in messages of iterations >= `from_iter`.
  const std::vector<double>& sent() const { return sent_; }
  const std::vector<double>& received() const { return received_; }
  void countFrom(int iter) { count_from_ = iter; }
  std::int64_t messages() const { return messages_; }

 private:
  struct Queued {
    std::int64_t priority;
    std::uint64_t seq;
    int id;
    bool operator>(const Queued& o) const { return priority != o.priority ? priority > o.priority : seq > o.seq; }
  };
  void start(int node, double now, EventQueue& events);

  double rate_, latency_, switch_rate_;
  bool by_priority_;
  std::vector<std::priority_queue<Queued, std::vector<Queued>, std::greater<Queued>>> queues_;
  std::vector<bool> busy_;
  std::vector<double> downlink_clock_;
  double switch_clock_ = 0;
  std::vector<Message> slots_;
  std::vector<int> free_;
  std::uint64_t seq_ = 0;
  std::vector<double> sent_, received_;
  int count_from_ = 0;
  std::int64_t messages_ = 0;
};

}  // namespace poseidon::sim
