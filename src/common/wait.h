// Deadline-bounded waiting. Every blocking wait in Poseidon has a deadline and also
// watches a shared failure flag, so one failed component wakes the others instead of
// leaving them blocked forever.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace poseidon {

using Clock = std::chrono::steady_clock;

// First error seen anywhere in a process's Poseidon components. Waiters poll it.
class FailureState {
 public:
  void set(std::exception_ptr error);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Rethrows the recorded error, if any.
  void rethrowIfFailed() const;

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::exception_ptr error_;  // guarded by mu_
};

// Waits on `cv` until `ready()` holds. Throws TimeoutError with `what` once `timeout` has
// passed, and rethrows the failure recorded in `failure` (checked every 50 ms).
template <typename Pred>
void waitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Pred ready,
             std::chrono::milliseconds timeout, const FailureState* failure, const std::string& what);

[[noreturn]] void throwTimeout(const std::string& what, std::chrono::milliseconds timeout);

template <typename Pred>
void waitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Pred ready,
             std::chrono::milliseconds timeout, const FailureState* failure, const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  const auto slice = std::chrono::milliseconds(50);
  while (!ready()) {
    if (failure != nullptr && failure->failed()) {
      lock.unlock();
      failure->rethrowIfFailed();
      lock.lock();
    }
    const auto now = Clock::now();
    if (now >= deadline) throwTimeout(what, timeout);
    cv.wait_until(lock, std::min(deadline, now + slice));
  }
}

}  // namespace poseidon
