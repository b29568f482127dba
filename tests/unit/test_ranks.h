// Threads as ranks: runs `body(rank)` on N threads over one loopback hub and rethrows the
// first exception any rank threw (after gloo's test/base_test.h).
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/loopback_transport.h"

namespace poseidon::testing {

inline void runRanks(int ranks, const std::function<void(Transport&, int)>& body) {
  LoopbackHub hub(ranks);
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(hub.transport(r), r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace poseidon::testing
