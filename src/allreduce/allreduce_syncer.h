// The layers of one worker that go by allreduce (the third HybComm scheme), driven through
// the dependency engine and the KVStore. Every iteration's tasks are pushed up front, in
// the same order on every rank (buckets in back-propagation order, all pushes before the
// steps); the gradient of each layer enters as an asynchronous task that ends when
// autograd reports it. Per bucket of fused layers:
//   grad(l) ready -> copy into the bucket -> KVStore push (sum over workers) -> SGD step
//   on each layer from the sums where the store keeps them (no pull's copy), with the
//   replicated optimizer state -> C[l] set.
// Every worker applies the same step to the same sums, so the replicas stay identical. In
// server mode on flat ranks the step goes by owner instead (stepByOwner): inside the
// collective each rank steps its slice of the bucket, with the momentum of that slice, and
// the stepped values (on a 16-bit wire: the 16-bit updates, new minus old) are gathered in
// place of the sums (Communicator::stepped), so each rank steps a P-th of the parameters
// and the replicas are still equal bit for bit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allreduce/fusion.h"
#include "allreduce/kvstore.h"
#include "sync/layer_syncer.h"
#include "engine/engine.h"
#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "update/sgd.h"

namespace poseidon {

class Transport;
class Digest;
class Timeline;
struct StateRecord;

struct AllreduceOptions {
  KVStoreOptions kvstore;
  std::int64_t fusion_bytes = kDefaultPairBytes;
  SgdOptions sgd;
  std::uint64_t start_iteration = 0;  // of a run resumed from a checkpoint
  Timeline* timeline = nullptr;       // records copies and steps, if set
  // The devices level on a node's leader, as the client wires it (empty when flat): adds
  // the node's devices' gradients to a layer's before its copy into the bucket, and shares
  // the layer's result with them after its step.
  std::function<void(int layer, std::uint64_t t, const std::vector<float*>& grads)> before_copy;
  std::function<void(int layer, std::uint64_t t)> after_step;
};

class AllreduceBuckets {
 public:
  // `layers`: the allreduce layers, `params[l]` layer l's tensors. `on_done(l)` is called
  // when layer l holds the parameters after the iteration it was synced for. Collective:
  // every worker constructs it with the same layers, and it broadcasts rank 0's values.
  AllreduceBuckets(const ModelInfo& model, const std::vector<int>& layers,
                   const std::vector<std::vector<float*>>& params, Transport& transport,
                   const AllreduceOptions& options, FailureState& failure, std::function<void(int)> on_done);
  ~AllreduceBuckets();

  // Queues iteration t's tasks (called once per iteration, t = 0, 1, ...).
  void schedule(std::uint64_t t);
  // Layer l's gradient of the current iteration is complete in `grads`.
  void gradientReady(int layer, std::vector<float*> grads);
  // Floats each worker hands to allreduce per iteration for layer l.
  std::int64_t floatsOfLayer(int layer) const;
  int workers() const { return workers_; }
  // Layer l's bytes sent per iteration, on the wire its sums travel (fp32 or 16 bits).
  std::uint64_t bytesOfLayer(int layer) const;
  // One line for the progress output: layers, buckets, design.
  std::string summary() const;
  // Weights, biases and (unless stepped by owner, which shards it) momentum: what every
  // replica must agree on.
  void addToDigest(Digest& digest) const;
  // The optimizer state (momentum: replicated, or by owner current on this rank's slices),
  // then the store's error feedback, for checkpoints.
  void addStateRecords(std::vector<StateRecord>& records);
  // Just the momentum's; reads no more than the containers' places (any thread).
  void addMomentumRecords(std::vector<StateRecord>& records);
  void momentumSeeded();
  // Iteration t's steps leave the layers marked `unused` (used by no rank) as they are;
  // before their gradients are handed over.
  void skipUnused(std::uint64_t t, const std::vector<bool>& unused);
  // Stops the store and the engine. The queued tasks of the iteration after the last
  // wait only for gradients that will not come, and are dropped.
  void stop();

 private:
  struct Layer;
  struct Bucket;
  static bool stepByOwner(const AllreduceOptions& options);
  void copyIn(Layer& layer, Bucket& bucket, std::int64_t offset, std::uint64_t t);
  // By owner: iteration t's step of values [begin, begin + n) of the bucket from every
  // rank's contribution (OwnerStep: their fp32 ring sum, or the 16-bit contributions added
  // in rank order as the step reads them).
  void stepSlice(Bucket& bucket, std::uint64_t t, std::size_t begin, std::size_t n,
                 const std::vector<GradientView>& from);
  void apply(Bucket& bucket, std::uint64_t t);

  FailureState& failure_;
  const SgdOptions sgd_;
  Timeline* const timeline_;
  const std::function<void(int, std::uint64_t, const std::vector<float*>&)> before_copy_;
  const std::function<void(int, std::uint64_t)> after_step_;
  const int workers_;
  const int rank_;
  const WireFormat wire_;  // how the sums travel
  const bool by_owner_;    // the step by owner (stepByOwner)
  std::function<void(int)> on_done_;
  std::vector<std::unique_ptr<Layer>> layers_;    // by model layer; null if not allreduce
  std::vector<std::unique_ptr<Bucket>> buckets_;  // in back-propagation order
  Engine engine_;
  std::unique_ptr<KVStore> store_;
  bool stopped_ = false;
};

// One allreduce layer as the client sees it: its gradient goes into the collective
// engine's queued tasks, which set the layer's C[l] themselves (the pool runs nothing).
class AllreduceSyncer final : public LayerSyncer {
 public:
  AllreduceSyncer(int layer, AllreduceBuckets& collective);
  SendFn gradientsReady(std::uint64_t t, std::vector<float*> grads, std::shared_ptr<const void> owner) override;
  bool runsItself() const override { return true; }
  // A fused collective carries several layers: the layer's share, 2 (P-1)/P of its bytes
  // per synced iteration (the communicators count each call's bytes in the transport).
  std::uint64_t bytesSent() const override;

 private:
  AllreduceBuckets& collective_;
  std::uint64_t synced_ = 0;  // iterations handed over in this run (compute thread)
};

}  // namespace poseidon
