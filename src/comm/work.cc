#include "comm/work.h"

#include "common/wait.h"

namespace poseidon {

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, cv_, [&] { return done_; }, timeout, nullptr, what_);
  if (error_) std::rethrow_exception(error_);
}

void Work::markDone(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = error;
  }
  cv_.notify_all();
}

}  // namespace poseidon
