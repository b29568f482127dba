// The compute spans of a forward that its caller drives layer by layer (the Python
// package's hooks), for the timeline a compute profile is made of: a layer's forward runs
// from the previous mark (so the modules without parameters before it count to it), less
// its wait for the sync; an iteration runs from one training forward's start to the next,
// with this thread's CPU time. All on the thread that runs the forward (the Timeline locks
// its own). Records nothing without a timeline or outside training.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "poseidon/timeline.h"

namespace poseidon {

class ForwardTimer {
 public:
  using Clock = std::chrono::steady_clock;

  // Before a forward's waits: what begin() needs to know of its start.
  struct Start {
    Clock::time_point at;
    double cpu_ms = 0;
  };
  Start now(Timeline* timeline) const;
  // The forward's up-front waits (from `start`) are over; `timeline` null: not timed.
  void begin(Timeline* timeline, bool training, const Start& start);
  // A layer's own wait for its sync, from `start` to now.
  void waited(const std::string& layer, Clock::time_point start);
  // A layer's forward ended now.
  void forwardDone(const std::string& layer);
  // Hooks firing after the forward (recomputation, a module called directly) record nothing.
  void end() { timing_ = nullptr; }
  bool timing() const { return timing_ != nullptr; }

 private:
  Timeline* timing_ = nullptr;  // this forward records its spans
  std::optional<Clock::time_point> last_begin_;
  double last_cpu_ = 0;  // this thread's CPU time (ms) at last_begin_
  Clock::time_point mark_;
};

}  // namespace poseidon
