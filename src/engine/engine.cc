#include "engine/engine.h"

#include <algorithm>
#include <atomic>

#include "poseidon/errors.h"

namespace poseidon {

struct Engine::Op {
  std::function<void(Done)> fn;
  std::vector<std::pair<Tag, bool>> deps;  // tag, mutates
  int waiting = 0;                         // deps not yet granted; guarded by Engine::mu_
  Kind kind = Kind::kCompute;
  std::atomic<bool> done{false};
  // Two owners: the body running on a pool thread and its completion. An async body may
  // report its end (from another thread) before it has returned itself, so the op, whose
  // function holds the body's captures, lives until both have let go.
  std::atomic<int> owners{2};
};

Engine::Engine(Threads threads, FailureState& failure) : failure_(failure) {
  POSEIDON_ENFORCE(threads.compute > 0 && threads.copy > 0 && threads.comm > 0, "every engine pool needs a thread");
  pools_.push_back(std::make_unique<ThreadPool>(threads.compute, "eng-compute", failure));
  pools_.push_back(std::make_unique<ThreadPool>(threads.copy, "eng-copy", failure));
  pools_.push_back(std::make_unique<ThreadPool>(threads.comm, "eng-comm", failure));
}

Engine::~Engine() { shutdown(); }

Engine::Tag Engine::newTag(std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  vars_.emplace_back();
  vars_.back().name = std::move(name);
  return vars_.size() - 1;
}

void Engine::push(std::function<void()> task, const std::vector<Tag>& reads, const std::vector<Tag>& mutates,
                  Kind kind) {
  pushAsync(
      [task = std::move(task)](Done done) {
        task();
        done();
      },
      reads, mutates, kind);
}

void Engine::pushAsync(std::function<void(Done)> task, const std::vector<Tag>& reads, const std::vector<Tag>& mutates,
                       Kind kind) {
  auto* op = new Op;
  op->fn = std::move(task);
  op->kind = kind;
  for (Tag t : mutates) op->deps.emplace_back(t, true);
  for (Tag t : reads) {
    if (std::find(mutates.begin(), mutates.end(), t) == mutates.end()) op->deps.emplace_back(t, false);
  }
  // One entry per tag: a task waits on a tag once.
  std::sort(op->deps.begin(), op->deps.end());
  op->deps.erase(
      std::unique(op->deps.begin(), op->deps.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
      op->deps.end());
  std::vector<Op*> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(op);
    ++outstanding_;
    op->waiting = static_cast<int>(op->deps.size());
    if (op->waiting == 0) ready.push_back(op);
    for (const auto& [tag, write] : op->deps) {
      POSEIDON_ENFORCE(tag < vars_.size(), "engine tag ", tag, " does not exist");
      vars_[tag].queue.emplace_back(op, write);
      grant(vars_[tag], ready);
    }
  }
  dispatch(ready);
}

// Hands the head of the tag's queue to whoever may run now: every leading read while no
// mutation runs, or one mutation when nothing runs. Called with mu_ held.
void Engine::grant(Var& var, std::vector<Op*>& ready) {
  while (!var.queue.empty() && !var.write_running) {
    auto [op, write] = var.queue.front();
    if (write && var.reads_running > 0) return;
    var.queue.pop_front();
    if (write) {
      var.write_running = true;
    } else {
      ++var.reads_running;
    }
    if (--op->waiting == 0) ready.push_back(op);
    if (write) return;
  }
}

void Engine::dispatch(const std::vector<Op*>& ready) {
  for (Op* op : ready) {
    pools_[static_cast<int>(op->kind)]->schedule([this, op] {
      try {
        op->fn([this, op] {
          if (op->done.exchange(true)) throw Error("an engine task reported its end twice");
          complete(op);
        });
      } catch (...) {
        release(op);
        throw;  // the pool records it as the run's failure
      }
      release(op);
    });
  }
}

void Engine::complete(Op* op) {
  std::vector<Op*> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [tag, write] : op->deps) {
      Var& var = vars_[tag];
      if (write) {
        var.write_running = false;
      } else {
        --var.reads_running;
      }
      grant(var, ready);
    }
    --outstanding_;
  }
  idle_.notify_all();
  release(op);
  dispatch(ready);
}

void Engine::release(Op* op) {
  if (op->owners.fetch_sub(1) != 1) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(op);
  }
  delete op;
}

void Engine::waitAll(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, idle_, [&] { return outstanding_ == 0; }, timeout, &failure_,
      detail::cat("the engine's ", outstanding_, " pending tasks"));
}

std::size_t Engine::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outstanding_;
}

void Engine::shutdown() {
  for (auto& pool : pools_) pool->shutdown();
  // The pools are joined: what is left never ran, failed, or never reported its end (a
  // failed run); nothing will touch those ops again.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& var : vars_) var.queue.clear();
  for (Op* op : live_) delete op;
  live_.clear();
}

}  // namespace poseidon
