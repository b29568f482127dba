#include "common/wait.h"

#include "poseidon/errors.h"

namespace poseidon {

void FailureState::set(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_) error_ = error;
  failed_.store(true, std::memory_order_release);
}

void FailureState::rethrowIfFailed() const {
  if (!failed()) return;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

void throwTimeout(const std::string& what, std::chrono::milliseconds timeout) {
  throw TimeoutError(detail::cat(what, " did not happen within ", timeout.count() / 1000.0,
                                 " s (the timeout option); a peer may have died or stalled"));
}

}  // namespace poseidon
