// The timeline (`poseidon train --timeline FILE`): spans of work per rank and per track
// (the compute thread's forward and backward of each layer; each layer's send, receive
// and apply; the engine's copies, collectives and steps) and counters (bytes moved per
// scheme), written as a Chrome trace that Perfetto or chrome://tracing opens. Recording is
// a lock and a vector push; a component holding no Timeline records nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace poseidon {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Timeline(int rank);

  // Times are measured from here on (reset once every rank has passed start-up).
  void setOrigin(Clock::time_point origin);
  // A complete span on `track` (a row in the viewer).
  void span(const std::string& track, const std::string& name, const char* category, Clock::time_point begin,
            Clock::time_point end);
  // A counter sample, e.g. bytes sent so far under one scheme.
  void counter(const std::string& name, double value, Clock::time_point at);
  // A measurement that is no span of wall time (the compute thread's CPU time in one
  // iteration): kept for durationsMs(), not drawn.
  void sample(const std::string& name, double ms);
  // Durations of the spans recorded so far, and the samples, in ms, by name.
  std::map<std::string, std::vector<double>> durationsMs() const;
  // CPU time the calling thread has used, in ms (CLOCK_THREAD_CPUTIME_ID).
  static double threadCpuMs();
  // This rank's events as JSON objects separated by commas (no brackets), rows named.
  std::string events() const;

 private:
  struct Event {
    std::string name, category;
    int track = 0;  // -1 for counters
    double ts_us = 0, dur_us = 0, value = 0;
  };
  int trackId(const std::string& track);  // with mu_ held

  const int rank_;
  mutable std::mutex mu_;
  Clock::time_point origin_;                            // guarded by mu_
  std::map<std::string, int> tracks_;                   // guarded by mu_
  std::vector<Event> events_;                           // guarded by mu_
  std::map<std::string, std::vector<double>> samples_;  // guarded by mu_
};

// Records [construction, destruction) as a span when `timeline` is not null.
class TimelineSpan {
 public:
  TimelineSpan(Timeline* timeline, std::string track, std::string name, const char* category)
      : timeline_(timeline),
        track_(std::move(track)),
        name_(std::move(name)),
        category_(category),
        begin_(timeline ? Timeline::Clock::now() : Timeline::Clock::time_point()) {}
  ~TimelineSpan() {
    if (timeline_) timeline_->span(track_, name_, category_, begin_, Timeline::Clock::now());
  }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  Timeline* timeline_;
  std::string track_, name_;
  const char* category_;
  Timeline::Clock::time_point begin_;
};

// The Chrome trace of a job: every rank's Timeline::events() (in rank order), with the
// model's name; what `poseidon train --timeline` and Python's write_timeline() write.
std::string chromeTrace(const std::vector<std::string>& rank_events, const std::string& model);

}  // namespace poseidon
