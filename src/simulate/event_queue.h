// The discrete-event core: events in time order, ties in the order they were scheduled, so
// a simulation is deterministic. An event is plain data (a type and three integers) rather
// than a closure: a 256-node run schedules millions of them.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace poseidon::sim {

struct Event {
  double time = 0;
  std::uint64_t seq = 0;
  int type = 0;
  int a = 0, b = 0, c = 0;
};

class EventQueue {
 public:
  void push(double time, int type, int a = 0, int b = 0, int c = 0) { heap_.push({time, next_++, type, a, b, c}); }
  bool empty() const { return heap_.empty(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  std::uint64_t scheduled() const { return next_; }

 private:
  // Strict weak order: earlier first, then scheduled first.
  struct Later {
    bool operator()(const Event& x, const Event& y) const { return x.time != y.time ? x.time > y.time : x.seq > y.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_ = 0;
};

}  // namespace poseidon::sim
