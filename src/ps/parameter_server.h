// The server side of one rank: a KVShard driven by its own thread. Pushes arrive from the
// transport (remote workers) or directly from the co-located client (zero copy); when a
// pair is final the fresh values go back to every worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/error_feedback.h"
#include "comm/transport.h"
#include "common/half.h"
#include "common/wait.h"
#include "poseidon/options.h"
#include "ps/kv_shard.h"

namespace poseidon {

class Timeline;

struct ServerConfig {
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::uint64_t start_iteration = 0;  // of a run resumed from a checkpoint
  // Straggler dropping: a step waits at most this long for a late worker (0: off).
  std::chrono::milliseconds straggler_timeout{0};
  int staleness = 0;  // SSP window; 0 is BSP
  // The co-located worker gets fresh values by message like the others, instead of
  // sharing the shard's memory: needed when it may compute while the shard steps.
  bool local_by_message = false;
  Timeline* timeline = nullptr;  // records each step, if set
  // Keeps the storage's memory alive: fresh values are sent from it without a copy, and a
  // send the network has not taken when the session closes keeps it as long as it lasts.
  std::shared_ptr<const void> values_owner;
  // A 16-bit wire under BSP. Server mode (the co-located worker sharing the shard's memory):
  // each step's update goes out in 16 bits (kParams16) and the shard keeps old values + the
  // rounded update, which is what every worker adds. Gradient mode (every worker reading by
  // message): the mean gradient goes out in 16 bits (kMeanGrad16), the one rounding every
  // worker reads. fp32: fresh values as they are.
  WireFormat update_wire = WireFormat::kFp32;
  // With a 16-bit update_wire: what rounding a pair's update lost is added to its next
  // update (error feedback), so the replicas follow the fp32 steps' sum.
  bool error_feedback = false;
};

class ParameterServer {
 public:
  // `on_local_fresh(key, iteration)` tells the co-located worker that a pair it pulls is
  // fresh; its values are already in the engine's memory (they alias the shard's).
  ParameterServer(const InformationBook& book, Transport& transport, const SgdOptions& options,
                  const std::function<float*(const KVPair&)>& storage,
                  std::function<void(std::uint32_t, std::uint64_t)> on_local_fresh, FailureState& failure,
                  const ServerConfig& config);
  ~ParameterServer();

  // From the transport thread: a kPushGrad or kPushGrad16 message.
  void onPush(Message message);
  // From the co-located client: its gradient for `key`, read in place. The memory must
  // stay untouched until the pair is fresh again (BSP guarantees it). Null: no rank used
  // the pair's layer this iteration (as an empty kPushGrad says).
  void pushLocal(std::uint32_t key, std::uint64_t iteration, const float* grad);

  // Factors of one FC layer from a worker (the 2015 paper's strategy): the shard turns
  // them into the gradient of each pair of that layer it holds. From the transport thread
  // (kPushFactors) or from the co-located client.
  void onPushFactors(Message message);

  // Workers that have pushed nothing here for `iteration` yet: who a stalled step waits for.
  std::vector<int> workersBehind(std::uint64_t iteration);
  // Blocks until every pair of this shard has completed `iterations` steps.
  void waitVersion(std::uint64_t iterations, std::chrono::milliseconds timeout);
  // Straggler dropping: worker updates left out of a step, and updates that came too late.
  std::uint64_t droppedUpdates() const { return dropped_.load(); }
  std::uint64_t lateUpdates() const { return late_.load(); }
  // Bytes of parameters this server sent, per layer.
  std::uint64_t bytesSentForLayer(int layer) const { return layer_bytes_[layer]; }
  void stop();
  // The shard's optimizer state, for checkpoints; only while no push is in flight.
  // The shard's optimizer state, then error feedback's residuals (ef/pair<key>/update).
  void addStateRecords(std::vector<StateRecord>& records);
  void momentumSeeded() { shard_.momentumSeeded(); }
  // The shard's momentum records alone (any thread: they only name its memory).
  void addMomentumRecords(std::vector<StateRecord>& records) { shard_.addStateRecords(records); }

 private:
  struct Push {
    std::uint32_t key;
    std::uint64_t iteration;
    int worker;
    Contribution contribution;
    Message factors;  // set for a factor push; key is then the layer
  };
  void runLoop();
  void apply(Push p);
  void applyFactors(const Push& p);
  // A 16-bit push (kPushGrad16): the shard sums its values in place (Contribution::half).
  void readHalf(Push& p) const;
  void publish(std::uint32_t key, std::uint64_t iteration);
  // One SGD step of `key` to `version`; with 16-bit updates, also the update to publish.
  void stepPair(std::uint32_t key, std::uint64_t version);
  void waitSends(std::uint32_t key);
  void notePush(int worker, std::uint64_t iteration);  // with mu_ held
  void finishStep(std::uint32_t key, std::uint64_t version);
  void dropStragglers();

  const InformationBook& book_;
  Transport& transport_;
  KVShard shard_;
  std::function<void(std::uint32_t, std::uint64_t)> on_local_fresh_;
  FailureState& failure_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> layer_bytes_;

  std::mutex mu_;
  std::condition_variable cv_;                 // wakes the server thread
  std::condition_variable version_cv_;         // wakes waitVersion
  std::deque<Push> queue_;                     // guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
  std::uint64_t min_version_ = 0;              // guarded by mu_: steps completed by every pair
  std::vector<std::uint64_t> pushed_through_;  // guarded by mu_: per worker, 1 + latest iteration pushed
  std::vector<std::uint64_t> completed_;       // server thread only: count of final pairs per version
  std::unordered_map<std::uint32_t, std::vector<std::shared_ptr<Work>>> sends_;  // server thread only
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds straggler_timeout_;  // 0: BSP waits for every worker
  const bool local_by_message_;
  const std::shared_ptr<const void> values_owner_;  // ServerConfig::values_owner
  const WireFormat update_wire_;
  const bool mean_gradients_;  // gradient mode: a step's "values" are the mean gradient
  const bool error_feedback_;
  std::unordered_map<std::uint32_t, Residual> update_residual_;  // by key, with error feedback; the server thread's
  std::vector<float> before_;                        // the server thread's: a pair's values before its step
  std::unordered_map<std::uint32_t, Message> updates_;  // the server thread's: each pair's last 16-bit update
  Timeline* const timeline_;
  // The shard's counters, copied for readers on other threads (the shard is this thread's).
  std::atomic<std::uint64_t> dropped_{0}, late_{0};
  std::thread thread_;
};

}  // namespace poseidon
