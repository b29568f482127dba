// One parameter-server shard: the KV pairs the information book assigns to it, their
// optimizer state, and aggregation. Each pair counts the workers' updates per iteration;
// when all of the pair's current iteration have arrived, its step can be applied. Under
// BSP (staleness 0) only the current iteration is accepted; with staleness s (SSP) a
// worker may already push iterations up to version + s, which wait in their own slots.
// Not thread-safe: the ParameterServer's thread is its only user.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "comm/message.h"
#include "coordinator/information_book.h"
#include "update/sgd.h"

namespace poseidon {

struct StateRecord;

// A worker's gradient for one pair: a pointer into a message it arrived in (kept alive
// here) or, for the co-located worker, straight into its engine gradient (zero copy); or
// the 16-bit values of a kPushGrad16 message, read in place (data is then null).
// Or the mark of a worker that says no rank used the pair's layer this iteration
// (`unused`: every worker sends it then, and the step leaves the pair as it is).
struct Contribution {
  const float* data = nullptr;
  Message keep_alive;
  HalfSpan half;
  bool unused = false;
  bool present() const { return data != nullptr || half.values != nullptr || unused; }
};

class KVShard {
 public:
  // `storage(pair)` gives where the pair's parameter values live: on a rank that also
  // trains, that is the engine's own parameter memory, so the local worker needs no copy.
  // Pairs start at version `start` (a run resumed from a checkpoint of that iteration).
  KVShard(const InformationBook& book, int shard, const SgdOptions& options,
          const std::function<float*(const KVPair&)>& storage, std::uint64_t start = 0, int staleness = 0);

  // Records one worker's gradient of `key` for `iteration`; returns ready(key). Throws
  // CommError on a pair of another shard, an iteration outside the window, or a duplicate.
  // With drops allowed, an update for a step that went ahead without it is discarded
  // (counted in late()).
  bool record(std::uint32_t key, std::uint64_t iteration, int worker, Contribution contribution);
  // Every worker's update for the pair's current iteration is in.
  bool ready(std::uint32_t key) const;
  // Applies the pair's current step with the updates present (their mean, in rank order)
  // and moves it to the next version. Returns how many workers were left out.
  int step(std::uint32_t key);
  // record, then step if ready; true if it stepped.
  bool push(std::uint32_t key, std::uint64_t iteration, int worker, Contribution contribution);

  // Straggler dropping (ATC'17): a step may go ahead with the updates that are present.
  void allowDrops() { drops_allowed_ = true; }
  // When the oldest first update of a step still waiting arrived; nothing if none waits.
  std::optional<std::chrono::steady_clock::time_point> oldestWaiting() const;
  // Pairs whose step has waited since `cutoff` or longer.
  std::vector<std::uint32_t> overdue(std::chrono::steady_clock::time_point cutoff) const;
  std::uint64_t dropped() const { return dropped_; }  // worker updates left out of steps
  std::uint64_t late() const { return late_; }        // updates that came after their step

  const float* values(std::uint32_t key) const { return state(key).values; }
  // For the server that owns the shard, between steps: rounding a step's update (16-bit wire).
  float* mutableValues(std::uint32_t key) { return stateOf(key).values; }
  // Workers whose update of `key` for the current iteration has not arrived.
  int missing(std::uint32_t key) const;
  // Number of steps applied to `key`.
  std::uint64_t version(std::uint32_t key) const { return state(key).version; }
  int shard() const { return shard_; }
  // Optimizer state for checkpoints: each pair's momentum, in key order (none without momentum).
  void addStateRecords(std::vector<StateRecord>& records);
  // The momentum was written from a loaded optimizer state: a pair's first step continues
  // it (SGD's buffer exists) instead of starting it from the gradient. Between steps.
  void momentumSeeded() { seeded_.store(true, std::memory_order_relaxed); }

 private:
  struct PairState {
    float* values = nullptr;
    std::vector<float> momentum;
    // Slot i holds the updates for iterations = i (mod staleness + 1), by worker rank.
    std::vector<std::vector<Contribution>> pending;
    std::vector<int> count;
    std::uint64_t version = 0;
    std::chrono::steady_clock::time_point first_at;  // of the first update of this step
    std::size_t slot() const { return static_cast<std::size_t>(version % pending.size()); }
  };
  const PairState& state(std::uint32_t key) const;
  PairState& stateOf(std::uint32_t key);

  const InformationBook& book_;
  const int shard_;
  const SgdOptions options_;
  const int workers_;
  const int staleness_;
  std::unordered_map<std::uint32_t, PairState> pairs_;
  bool drops_allowed_ = false;
  std::uint64_t dropped_ = 0;
  std::uint64_t late_ = 0;
  std::atomic<bool> seeded_{false};  // momentumSeeded()
};

}  // namespace poseidon
