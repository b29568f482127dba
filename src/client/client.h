// The client library of one worker (ATC'17 §4.2): a Syncer per layer (parameter server,
// sufficient factors or allreduce, as the plan says; made in one place and called through
// LayerSyncer only), a thread pool that runs them, and the BSP completion vector C. Wait-free back-propagation: the
// adapter reports layer l's gradient (or factors) the moment autograd produces it, and sync(l) starts on the pool at
// once while back-propagation continues below; the next forward of layer l waits only for C[l]. Without WFBP the syncs
// start together after the whole backward pass.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "allreduce/allreduce_syncer.h"
#include "sync/layer_syncer.h"
#include "comm/transport.h"
#include "common/half.h"
#include "common/thread_pool.h"
#include "common/wait.h"
#include "coordinator/cost_model.h"
#include "coordinator/information_book.h"
#include "node/worker.h"
#include "poseidon/options.h"
#include "update/sgd.h"

namespace poseidon {

class ParameterServer;
class Digest;
class Timeline;
class NodeStage;
struct StateRecord;

struct ClientOptions {
  bool wfbp = true;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  SgdOptions sgd;  // for layers updated on the workers (SFB, allreduce)
  KVStoreOptions kvstore;
  std::int64_t fusion_bytes = kDefaultPairBytes;
  std::uint64_t start_iteration = 0;  // of a run resumed from a checkpoint
  int staleness = 0;                  // SSP window for PS layers; 0 is BSP
  bool local_by_message = false;      // the co-located shard keeps its own values
  Timeline* timeline = nullptr;       // records each layer's send, receive and apply
  // On a node's leader (devices per node > 1): the devices' share comes in before each
  // layer's Send, and the layer's result goes back to them after its Move.
  NodeStage* node = nullptr;
  WireFormat wire = WireFormat::kFp32;  // how PS layers push gradients
  WireFormat update_wire = WireFormat::kFp32;  // PsSyncerOptions::updates
  bool error_feedback = false;                 // PsSyncerOptions::error_feedback
  WireFormat factor_wire = WireFormat::kFp32;  // how SFB layers' factors travel
};

class Client : public Worker {
 public:
  // `params[l]` are layer l's tensors in the engine, in ModelInfo order; `schemes[l]` how
  // layer l is synchronised.
  Client(const InformationBook& book, Transport& transport, ParameterServer* local_server,
         const std::vector<std::vector<float*>>& params, const std::vector<Scheme>& schemes,
         const ClientOptions& options, FailureState& failure);
  ~Client() override;

  // PS layer l's gradient for the current iteration is complete in `grads`.
  void gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> owner) override;
  // SFB layer l's factors: U (K x M) at the output, V (K x N) the input; copied at once.
  void factorsReady(int layer, const float* U, const float* V, std::int64_t K) override;
  // Gradient mode: SFB layer l's mean gradient goes into `grads` (see SfbSyncer).
  void setFactorGradients(int layer, std::vector<float*> grads) override;
  // Autograd no longer needs SFB layer l's weight in this backward pass.
  void layerReleased(int layer) override;
  // The backward pass is over: without WFBP the syncs start now. Advances the iteration.
  void endIteration() override;
  // Blocks until layer l holds the parameters of the current iteration (C[l]).
  void waitLayer(int layer) override;
  void waitAll() override;
  bool setFactorApplier(int layer, std::unique_ptr<FactorApplier>& applier) override;

  void onParams(Message message);
  void onLocalFresh(std::uint32_t key, std::uint64_t version);
  // A message for one layer's syncer from a peer: factors (SFB) or rows (sparse rows).
  void onLayerMessage(Message message);

  std::uint64_t iteration() const override { return iteration_; }
  // SSP: the most iterations' updates any read of this worker lacked (at most staleness).
  std::uint64_t maxStalenessSeen() const;
  // The allreduce layers' set-up in one line, or "" if there are none.
  std::string collectiveSummary() const { return allreduce_ ? allreduce_->summary() : ""; }
  std::uint64_t bytesSentForLayer(int layer) const;
  // Digest of what the replicas of SFB and allreduce layers must agree on (weights,
  // biases, momentum).
  void addReplicatedStateToDigest(Digest& digest) const;
  // Optimizer state kept on the workers (SFB and allreduce layers), for checkpoints.
  void addStateRecords(std::vector<StateRecord>& records);
  void momentumSeeded();
  // Iteration t's steps leave the layers no rank used as they are (PS layers' shards,
  // AllreduceBuckets; SFB layers see no factor rows from any rank and skip by themselves).
  void skipUnused(std::uint64_t t, const std::vector<bool>& unused);
  // The momentum of the allreduce layers (what an owner keeps current): any thread.
  void addAllreduceMomentum(std::vector<StateRecord>& records) const;

 private:
  std::unique_ptr<LayerSyncer> makeSyncer(int layer, Scheme scheme, ParameterServer* local_server,
                                          const std::vector<float*>& params);
  LayerSyncer& syncer(int layer) const;  // fails for a layer with nothing to sync
  void report(int layer, LayerSyncer::SendFn send);
  void deliver(int layer, Message message);
  void waitSynced(int layer, std::uint64_t version);
  void startSync(int layer);

  const InformationBook& book_;
  Transport& transport_;
  const ClientOptions options_;
  FailureState& failure_;
  std::vector<std::unique_ptr<LayerSyncer>> syncers_;  // by layer; null for a layer with nothing to sync
  std::vector<std::uint32_t> layer_of_key_;
  std::uint64_t iteration_ = 0;                    // compute thread only
  std::vector<LayerSyncer::SendFn> pending_send_;  // compute thread only: by layer
  std::vector<bool> reported_;                     // compute thread only
  std::vector<bool> started_;                      // compute thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> complete_;                   // guarded by mu_: the BSP vector C
  std::unique_ptr<AllreduceBuckets> allreduce_;  // the allreduce layers' engine, if any
  ThreadPool pool_;                              // last: its threads stop before the syncers go
};

}  // namespace poseidon
