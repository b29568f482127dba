#include "common/thread_pool.h"

#include <pthread.h>

#include "poseidon/errors.h"

namespace poseidon {

ThreadPool::ThreadPool(int threads, const std::string& name, FailureState& failure) : failure_(failure) {
  POSEIDON_ENFORCE(threads > 0);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, thread_name = name + "-" + std::to_string(i)] {
      pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
      runLoop();
    });
  }
}

ThreadPool::~ThreadPool() { shutdown(); }

void ThreadPool::schedule(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    POSEIDON_ENFORCE(!stop_, "task scheduled on a pool that is shut down");
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && threads_.empty()) return;
    stop_ = true;  // accepts no more; the loop drains what is queued
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void ThreadPool::runLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (...) {
      failure_.set(std::current_exception());
    }
    lock.lock();
  }
}

}  // namespace poseidon
