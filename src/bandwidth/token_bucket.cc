#include "bandwidth/token_bucket.h"

#include <algorithm>
#include <thread>

#include "common/wait.h"

namespace poseidon {

TokenBucket::TokenBucket(double bytes_per_s, double burst_bytes, Clock::time_point now)
    : rate_(std::max(0.0, bytes_per_s)), burst_(std::max(0.0, burst_bytes)), tokens_(burst_), last_(now) {}

void TokenBucket::refill(Clock::time_point now) {
  if (now <= last_) return;
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = now;
}

TokenBucket::Clock::duration TokenBucket::wait(Clock::time_point now) {
  if (!limited()) return Clock::duration::zero();
  std::lock_guard<std::mutex> lock(mu_);
  refill(now);
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(-tokens_ / rate_)) +
         Clock::duration(1);
}

void TokenBucket::charge(double bytes, Clock::time_point now) {
  if (!limited()) return;
  std::lock_guard<std::mutex> lock(mu_);
  refill(now);
  tokens_ -= bytes;
}

void TokenBucket::acquire(double bytes, const FailureState* failure) {
  if (!limited()) return;
  while (true) {
    const auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      refill(now);
      if (tokens_ >= 0) {
        tokens_ -= bytes;
        return;
      }
    }
    if (failure != nullptr) failure->rethrowIfFailed();
    // Short slices, so that a failure elsewhere ends the wait soon.
    std::this_thread::sleep_for(std::min<Clock::duration>(wait(now), std::chrono::milliseconds(20)));
  }
}

}  // namespace poseidon
