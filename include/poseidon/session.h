// A Poseidon session: one model trained data-parallel by the ranks of a job. It owns the
// coordinator's information book, this rank's parameter-server shard (if it holds one)
// and this rank's client (if it is a worker). It moves float buffers described by a
// ModelInfo; the LibTorch adapter (poseidon/torch.h) drives it from autograd hooks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/collectives.h"
#include "poseidon/factor_applier.h"
#include "poseidon/model_info.h"
#include "poseidon/options.h"
#include "poseidon/plan.h"
#include "poseidon/send_stats.h"
#include "poseidon/state_record.h"
#include "poseidon/timeline.h"

namespace poseidon {

// Made by Runtime (transport(), newTransport()) and only handed on: opaque here.
class Transport;

// Where this rank stands in the job: fixed when the session starts.
struct SessionLayout {
  int rank = 0;
  int size = 1;
  bool worker = false;     // this rank trains
  bool has_shard = false;  // this rank holds a parameter-server shard
  int workers = 1;         // ranks that train (every device of every node)
  // The devices level (Options::devices_per_node): its nodes (the rank count when flat),
  // and how this rank's node works inside (shared memory or messages; "" when flat).
  int nodes = 1;
  int devices_per_node = 1;
  std::string node_summary;
  // This rank in the book's cluster (the network exchange): its node's index if it leads
  // a node, -1 for a device beside its leader, the rank itself when flat.
  int network_rank = 0;
  // The parameter server's shards and the KV pairs the model is cut into.
  int shards = 0;
  std::size_t kv_pairs = 0;
};

// What this rank's session has done so far: the figures the front ends report.
struct SessionStats {
  // Bytes sent over the network (all traffic but that to the other ranks of this rank's
  // node), and per layer (training traffic only).
  std::uint64_t bytes_sent = 0;
  std::vector<std::uint64_t> bytes_sent_by_layer;
  // The cost model's bytes per iteration for each layer at the session's batch
  // (Options::batch per device; 0 on a device beside its node's leader, which sends nothing).
  std::vector<double> predicted_bytes_by_layer;
  // SSP: the most iterations' updates any read of this worker lacked (at most staleness).
  std::uint64_t max_staleness_seen = 0;
  // Straggler dropping at this rank's shard: worker updates left out of a step, and
  // updates that arrived after their step had gone ahead.
  std::uint64_t dropped_updates = 0;
  std::uint64_t late_updates = 0;
  // What this rank's bandwidth manager did: messages sent over the network, their waits.
  SendQueueStats send_queue;
  // The allreduce layers' set-up in one line ("" if none, or on a rank that does not train).
  std::string collective_summary;
};

class Session {
 public:
  // `params[l][t]` is where tensor t of layer l lives; rank 0's values are broadcast to
  // every rank here (compared instead with Options::replicas_equal). Checks that all ranks
  // agree on model, options and information book. The session starts `transport`; one
  // session per transport. A shard sharing the engine's memory sends fresh values from
  // `params` in place: `params_owner` keeps that memory alive for as long as a send of it
  // lasts, also past the session's end on a failed job (null: the caller keeps it valid
  // until the job ends).
  Session(Transport& transport, const ModelInfo& model, std::vector<std::vector<float*>> params,
          const Options& options, std::shared_ptr<const void> params_owner = nullptr);
  ~Session();

  const SessionLayout& layout() const;
  // The model as the ranks agreed on it (rank 0's description).
  const ModelInfo& model() const;
  // The job's small collectives over this session's transport (all ranks).
  Collectives& control();

  // Worker side, once per iteration: every layer's gradient, then endIteration(). The
  // gradient may be sent from where it is: `owner` keeps that memory alive for as long as
  // a send of it lasts, also past the session's end on a failed job (null: the caller keeps
  // it valid until the job ends).
  void gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> owner = nullptr);
  void endIteration();
  // For a layer that goes by sufficient factors (usesFactors(plan()[layer].scheme)): its
  // factors instead of its gradient, U (K x M) at the output and V (K x N) the input;
  // copied before returning.
  void factorsReady(int layer, const float* U, const float* V, std::int64_t K);
  // Gradient mode, before each iteration's factorsReady: where an SFB layer's mean gradient
  // goes (its weight's and bias's gradient buffers; autograd computes none for it).
  void setFactorGradients(int layer, std::vector<float*> grads);
  // Autograd no longer needs that layer's weight in this backward pass (it may change now).
  void layerReleased(int layer);
  // Before the first iteration: SFB layer l's factors are applied by `applier` (the
  // engine's weights live elsewhere than the host buffers, e.g. on a GPU). Returns false,
  // leaving `applier` with the caller, where this rank keeps the host applier (not a
  // worker, the layer not SFB here, or the devices level, whose leader shares host values).
  bool setFactorApplier(int layer, std::unique_ptr<FactorApplier>& applier);
  // Server mode: the lr, momentum and weight decay that this iteration's update (and the
  // later ones, until set again) applies, as the loop's optimizer holds them now; before
  // the iteration's first forward. Momentum may not become non-zero in a run begun without.
  void setStepValues(float lr, float momentum, float weight_decay);

  // Before layer l's forward: its parameters are those of the current iteration.
  void waitLayer(int layer);
  void waitAll();
  std::uint64_t iteration() const;
  // At the iteration's end, before the hand-overs of the layers this rank did not use
  // (DDP's find_unused_parameters rule): this rank's use of each layer, then (only where
  // it did not use some) which layers no rank used, waiting for every rank to record its
  // own; the steps of those then leave them as they are (skipUnused, where the scheme
  // steps on the workers: SFB and allreduce layers).
  void recordUse(const std::vector<bool>& used);
  std::vector<bool> unusedByAll();
  void skipUnused(const std::vector<bool>& unused);
  // Server-only ranks: serve until every pair of the shard has had `iterations` steps.
  void serveUntil(std::uint64_t iterations);

  // The scheme chosen for each layer, with the cost model's figures and reasons, and the
  // machine's rates the time rule used.
  const std::vector<LayerPlan>& plan() const;
  const PlatformRates& rates() const;
  // What a run resumed from this run's checkpoints must share with it: the options'
  // run configuration (ConfigurationUse::kResume), the model, the plan and the nodes, and
  // the front end's own settings (`front_end`: its data order, its optimizer).
  std::string resumeConfiguration(const std::string& front_end) const;
  // This rank's whole training state as views of live memory, for checkpoints: parameters,
  // the shard's optimizer state, replicated optimizer state. Valid only between
  // iterations, after waitAll() (and serveUntil() on a server-only rank).
  std::vector<StateRecord> stateRecords();
  // Server mode, between iterations, on this rank alone: the SGD momentum of every
  // parameter, gathered from the ranks that hold it (each shard its pairs', each allreduce
  // owner its slices'; the replicated layers' from this rank), as the pieces came. Every
  // other rank's transport thread answers, so their loops need not call it (optimizer.
  // state_dict() on rank 0). Refused under SSP and straggler dropping and on a node's device.
  std::vector<MomentumValues> gatherMomentum();
  // The momentum records were written from a loaded optimizer state (AutogradSync::
  // seedMomentum): the next step continues the buffers instead of starting them.
  void momentumSeeded();
  // Digest of the state every worker replicates (SFB and allreduce layers, their momentum
  // where it is replicated, not where allreduce layers step by owner;
  // PS layers whose shards send 16-bit updates, which each worker adds to its own copy).
  std::string replicaDigest() const;
  SessionStats stats() const;
  // The timeline this session records into, or null (Options::timeline).
  Timeline* timeline() const;

  // Waits for outstanding syncs and for every rank to get here; stops the server and the
  // client's threads. Called by the destructor if not called before.
  void finish();
  // Instead of finish() when this rank is failing (an exception in the training loop): no
  // closing barrier, and every wait in flight stops now with `why`; the peers' sessions
  // fail at once with it too (Transport::leave).
  void abandon(const std::string& why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace poseidon
