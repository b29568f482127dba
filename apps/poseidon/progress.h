// Rank 0's progress line of `poseidon train`, about every 5 s or every N iterations.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace poseidon::app {

class ProgressPrinter {
 public:
  ProgressPrinter(bool enabled, int every) : enabled_(enabled), every_(every) {}
  // `force`: print whether due or not (sync points, the last iteration). `loss` is read
  // only when a line is printed (on a GPU, reading it waits for the device).
  void iteration(std::int64_t it, std::int64_t total, std::int64_t epoch, std::int64_t epochs,
                 const std::function<double()>& loss, double s_per_iter, double images_per_iter, bool force,
                 const std::function<std::uint64_t()>& dropped);

 private:
  bool enabled_;
  int every_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Test hooks for failure tests: POSEIDON_FAULT_EXIT="RANK:ITERATION" makes that rank die
// abruptly (as a crash would) when it reaches that iteration; POSEIDON_FAULT_DELAY=
// "RANK:ITERATION:MS" makes it stall that long there (a straggler).
void maybeInjectFault(int rank, std::int64_t iteration);

}  // namespace poseidon::app
