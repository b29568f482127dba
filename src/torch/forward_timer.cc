#include "torch/forward_timer.h"

#include <algorithm>

namespace poseidon {

ForwardTimer::Start ForwardTimer::now(Timeline* timeline) const {
  // The CPU clock is read only where the forward is timed.
  return Start{Clock::now(), timeline ? Timeline::threadCpuMs() : 0.0};
}

void ForwardTimer::begin(Timeline* timeline, bool training, const Start& start) {
  if (!training) last_begin_.reset();  // an evaluation is no part of an iteration
  timing_ = training ? timeline : nullptr;
  if (!timing_) return;
  const auto now = Clock::now();
  timing_->span("compute", "wait begin", "wait", start.at, now);
  if (last_begin_) {
    timing_->span("loop", "iteration", "iteration", *last_begin_, start.at);
    // This thread's CPU time: the host CPU bound's.
    timing_->sample("cpu iteration", std::max(0.0, start.cpu_ms - last_cpu_));
  }
  last_begin_ = start.at;
  last_cpu_ = start.cpu_ms;
  mark_ = now;
}

void ForwardTimer::waited(const std::string& layer, Clock::time_point start) {
  if (!timing_) return;
  const auto end = Clock::now();
  timing_->span("compute", "wait " + layer, "wait", start, end);
  mark_ += end - start;
}

void ForwardTimer::forwardDone(const std::string& layer) {
  if (!timing_) return;
  const auto now = Clock::now();
  timing_->span("compute", "forward " + layer, "forward", mark_, now);
  mark_ = now;
}

}  // namespace poseidon
