// Handle of an asynchronous operation (after c10d's Work): a bounded wait for its
// completion, which rethrows the error if the operation failed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace poseidon {

class Work {
 public:
  explicit Work(std::string what) : what_(std::move(what)) {}

  // Blocks until completion; throws TimeoutError after `timeout`, rethrows the op's error.
  void wait(std::chrono::milliseconds timeout);

  // Called by the transport.
  void markDone(std::exception_ptr error = nullptr);

 private:
  const std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;         // guarded by mu_
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace poseidon
