#include "comm/work.h"

#include "common/wait.h"

namespace poseidon {

bool Work::isCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, cv_, [&] { return done_; }, timeout, nullptr, what_);
  if (error_) std::rethrow_exception(error_);
}

std::exception_ptr Work::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
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
