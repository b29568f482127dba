// The Syncer of a layer that goes through the parameter server (ATC'17 §4.2). For
// iteration t:
//   Send    - push this layer's gradient, cut into KV pairs, to the shards that own them
//             (the co-located shard reads it in place, remote ones get a copy);
//   Receive - block until every pair of the layer is fresh (version t+1);
//   Move    - copy fresh values that arrived as messages into the engine's parameters and
//             clear the engine's gradient for the next iteration.
// Fresh values may arrive before Receive starts; they wait in the syncer's slots.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "sync/layer_syncer.h"
#include "comm/error_feedback.h"
#include "comm/transport.h"
#include "common/half.h"
#include "common/wait.h"
#include "coordinator/information_book.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

class ParameterServer;

struct PsSyncerOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::uint64_t start_iteration = 0;
  int staleness = 0;  // SSP window; 0 is BSP
  // Gradient mode: the shards send the mean gradient, which Move writes into the gradients.
  bool into_gradients = false;
  // The co-located shard keeps values of its own (SSP, straggler dropping, gradient mode):
  // pushes reach it by message like any other's, not in place.
  bool local_by_message = false;
  // The 2015 paper's factor push: the layer hands over factors, which the shards reconstruct.
  bool factor_push = false;
  // Gradients pushed in 16 bits (kPushGrad16); a pair of this rank's own shard is rounded
  // alike in place.
  WireFormat wire = WireFormat::kFp32;
  // How the shards send fresh values back with a 16-bit wire under BSP: in server mode
  // updates (kParams16), which each worker adds to its own copy; in gradient mode the mean
  // gradient (kMeanGrad16), which each worker writes into its gradient. Else fp32 values.
  WireFormat updates = WireFormat::kFp32;
  // With a 16-bit wire: what each rounding of a pair's push lost is added to its next push
  // (error feedback, as PowerSGD and 1-bit SGD do; a push that straggler dropping drops
  // loses its share too).
  bool error_feedback = false;
};

class PsSyncer final : public LayerSyncer {
 public:
  // `local_shard`: this rank's shard, or null.
  PsSyncer(int layer, const InformationBook& book, Transport& transport, ParameterServer* local_shard,
           std::vector<float*> params, const FailureState& failure, const PsSyncerOptions& options);

  SendFn gradientsReady(std::uint64_t t, std::vector<float*> grads, std::shared_ptr<const void> owner) override;
  SendFn factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K) override;
  // A factor push waits for the weight's release: the co-located shard updates the
  // engine's weight in place, which autograd may still be about to read.
  bool startsAtRelease() const override { return factor_push_; }

  void Send(std::uint64_t iteration, const std::vector<float*>& grads, const std::shared_ptr<const void>& memory);
  // The 2015 paper's strategy for an FC layer: this worker's factors (a kPushFactors
  // message) go to every shard holding pairs of the layer, which reconstruct their slices.
  void SendFactors(std::uint64_t iteration, Message factors);
  // Packs factors for SendFactors.
  Message packFactors(std::uint64_t iteration, const float* U, const float* V, std::int64_t K) const;
  void Receive(std::uint64_t iteration) override;
  void Move(std::uint64_t iteration) override;
  // SSP, on the compute thread before the layer's forward of iteration t: waits until every
  // pair has at least `version` steps, then copies the newest values that came in.
  void beforeRead(std::uint64_t version, std::uint64_t t) override;
  std::uint64_t maxStalenessSeen() const override { return max_staleness_.load(); }
  // Rethrows a wait's timeout (the client's, on this layer) naming the likely culprits.
  void explainTimeout(const TimeoutError& e, std::uint64_t iteration) const override;

  // A shard's fresh values (kParams), on the transport thread; the co-located shard's.
  void deliver(Message message) override;
  void localFresh(std::uint32_t key, std::uint64_t version) override;
  // Iteration t's pushes say so instead of carrying zeros: empty kPushGrad messages, and a
  // null gradient for the co-located shard.
  void usedByNoRank(std::uint64_t t) override { unused_before_ = t + 1; }
  // With 16-bit updates each worker adds them to its own copy, as SFB does: the layer's
  // values join the digest that --verify compares (fp32 values are the servers' own copies).
  void addToDigest(Digest& digest) const override;
  // Error feedback's residuals (ef/pair<key>/push), so a resumed run carries on with them.
  void addStateRecords(std::vector<StateRecord>& records) override;

 private:
  // Fresh values of `key` (empty: in place from the co-located shard).
  void store(std::uint32_t key, std::uint64_t version, Message message);
  // Rethrows a wait's timeout naming the workers that sent no update for `iteration` to
  // this rank's shard and the shards whose fresh values for it did not come (a
  // CulpritTimeout; one already explained passes through unchanged). Holds mu_.
  [[noreturn]] void throwNamingCulprits(const TimeoutError& e, std::uint64_t iteration) const;
  // The push of `key` for `iteration`, copied into its message (in 16 bits on a 16-bit wire).
  // With error feedback it carries the pair's residual too, and keeps what its rounding lost.
  Message copyOfPush(std::uint32_t key, std::uint64_t iteration, const float* src);
  // 16-bit wire: the push of `key` as the co-located shard reads it in place (rounded_).
  const float* roundedForShard(std::uint32_t key, const float* src);
  // The pushes of a layer no rank used in `iteration` (usedByNoRank).
  void sendUnused(std::uint64_t iteration);
  // From now on Receive waits for version iteration + 1 of every pair.
  void expect(std::uint64_t iteration);

  struct Slot {
    std::uint64_t version = 0;  // version of the values it last received
    Message message;            // empty when the values came from the local shard
  };

  const InformationBook& book_;
  Transport& transport_;
  ParameterServer* const local_shard_;  // pushes in place unless local_by_message_; names who a wait waits for
  const bool local_by_message_;
  const std::vector<float*> params_;
  std::vector<float*> grads_;                 // of the iteration in progress; cleared by Move (none for factors)
  std::vector<std::shared_ptr<Work>> sends_;  // pushes still reading grads_
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
  const std::vector<std::uint32_t>& keys_;
  const int staleness_;
  // Gradient mode: the shards send the mean gradient, which Move writes into grads_.
  const bool into_gradients_;
  const bool factor_push_;
  std::uint64_t unused_before_ = 0;  // 1 + the iteration no rank used this layer in (usedByNoRank)
  const WireFormat wire_;
  const bool error_feedback_;
  const WireFormat updates_;
  // 16-bit wire: the co-located shard's pairs, rounded as a message would be, read in place
  // by the shard until the pair is fresh; by position in keys_.
  std::vector<std::vector<float>> rounded_;
  // Error feedback: each pair's residual (by position in keys_); guarded by feedback_mu_
  // (SSP pushes of two iterations may overlap).
  std::mutex feedback_mu_;
  std::vector<Residual> residual_;
  std::atomic<std::uint64_t> max_staleness_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;  // guarded by mu_; by position in keys_
  int fresh_ = 0;            // guarded by mu_; slots at the awaited version
  std::uint64_t awaited_;    // guarded by mu_
};

}  // namespace poseidon
