// What the micro-benchmarks time with: a call's wall seconds, and the median of rounds.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace poseidon::bench {

inline double seconds(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace poseidon::bench
