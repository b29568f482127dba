// The dependency engine (MXNet's, as Mamidala 2018 embeds MPI into it): tasks are pushed
// with the tags they read and the tags they mutate, and run on a worker pool of their kind
// once every earlier conflicting task has finished. Per tag, reads may run together and a
// mutation runs alone, all in push order. So the order in which tasks are *pushed* fixes
// the order in which conflicting tasks *run*, whatever order their inputs become ready
// in; that is what lets every rank issue its collectives in the same order.
//
// A task may also be asynchronous: it receives a `Done` to call, from any thread, when
// it is finished (an event from outside the engine, such as autograd producing a gradient,
// or a request handed to another thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/thread_pool.h"
#include "common/wait.h"

namespace poseidon {

class Engine {
 public:
  // Worker pools, one per kind of task, so a blocking collective never holds up a copy.
  enum class Kind { kCompute = 0, kCopy = 1, kComm = 2 };
  struct Threads {
    int compute = 1;
    int copy = 1;
    int comm = 1;
  };
  using Tag = std::size_t;
  using Done = std::function<void()>;

  Engine(Threads threads, FailureState& failure);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // A new tag (a variable in MXNet's terms). `name` is for error messages.
  Tag newTag(std::string name);

  // Runs `task` once every earlier task that mutates a tag in `reads`, and every earlier
  // task that reads or mutates a tag in `mutates`, has finished. A tag in both lists is
  // mutated.
  void push(std::function<void()> task, const std::vector<Tag>& reads, const std::vector<Tag>& mutates, Kind kind);
  // The same, but the task is finished only when it calls its Done (exactly once, and
  // never after shutdown(), which frees what is still pending).
  void pushAsync(std::function<void(Done)> task, const std::vector<Tag>& reads, const std::vector<Tag>& mutates,
                 Kind kind);

  // Blocks until every task pushed so far has finished; throws TimeoutError naming what
  // is still pending after `timeout`, or the first error a task raised.
  void waitAll(std::chrono::milliseconds timeout);
  // Tasks pushed and not yet finished.
  std::size_t pending() const;
  // Stops the pools after the queued tasks; tasks still waiting on tags are dropped.
  void shutdown();

 private:
  struct Op;
  struct Var {
    std::string name;
    std::deque<std::pair<Op*, bool>> queue;  // waiting tasks, with "mutates"
    int reads_running = 0;
    bool write_running = false;
  };

  void grant(Var& var, std::vector<Op*>& ready);
  void dispatch(const std::vector<Op*>& ready);
  void complete(Op* op);
  void release(Op* op);

  FailureState& failure_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::deque<Var> vars_;                            // guarded by mu_; a deque so references stay valid
  std::size_t outstanding_ = 0;                     // guarded by mu_
  std::unordered_set<Op*> live_;                    // guarded by mu_: every op not yet freed
  std::vector<std::unique_ptr<ThreadPool>> pools_;  // by Kind
};

}  // namespace poseidon
