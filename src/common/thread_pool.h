// A fixed pool of named threads running queued tasks. Shuts down in one order: stop
// accepting, drain the queue, set stop under the lock, notify, join. A task that throws
// records its error in the FailureState instead of killing the process.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/wait.h"

namespace poseidon {

class ThreadPool {
 public:
  ThreadPool(int threads, const std::string& name, FailureState& failure);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void schedule(std::function<void()> task);
  void shutdown();

 private:
  void runLoop();

  FailureState& failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace poseidon
