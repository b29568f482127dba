// The bandwidth manager's budget (the 2015 paper keeps each node under a bandwidth
// budget): a token bucket in bytes at the network interface. Tokens refill at the budget's
// rate up to `burst`; a send takes its bytes and may leave the balance negative (a message
// is never cut for the budget), and the next send waits until the balance is positive
// again. Over any period T the node sends at most rate * T + burst + one message.
// Thread-safe: the transport's progress thread polls it, the collectives block on it.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace poseidon {

class FailureState;

// Bytes a payload of `bytes` occupies at the NIC: TCP/IPv4 over Ethernet (MTU 1500, TCP
// timestamps) carries 1448 bytes in every 1514-byte frame. The budget is a rate at the
// interface, which is where a user (and the lab's counters) measure it.
inline double nicBytes(std::size_t bytes) { return static_cast<double>(bytes) * (1514.0 / 1448.0); }

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // `bytes_per_s` = 0: unlimited (every wait is zero).
  TokenBucket(double bytes_per_s, double burst_bytes, Clock::time_point now = Clock::now());

  bool limited() const { return rate_ > 0; }
  double rate() const { return rate_; }
  // How long from `now` until a send may start (zero: now).
  Clock::duration wait(Clock::time_point now);
  // Takes `bytes` for a send that starts at `now`.
  void charge(double bytes, Clock::time_point now);
  // Blocks until a send may start, then charges it: for callers other than the progress
  // thread (the collectives). Rethrows `failure`'s error while it waits.
  void acquire(double bytes, const FailureState* failure);

 private:
  void refill(Clock::time_point now);  // with mu_ held

  const double rate_;
  const double burst_;
  std::mutex mu_;
  double tokens_;           // guarded by mu_
  Clock::time_point last_;  // guarded by mu_
};

}  // namespace poseidon
