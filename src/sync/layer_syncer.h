// One layer's synchronisation, whatever the scheme (ATC'17 §4.2: a Syncer per layer). The
// client asks every layer the same questions through this interface and never which
// scheme it goes by: what to send once the adapter has handed over the layer's gradient
// or factors, when the sync may start, who runs it, and, on the client's thread pool,
// Send, then Receive and Move. A scheme overrides what applies to it; the defaults say
// "nothing to do" or, for a hand-over the scheme cannot take, fail loudly.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/message.h"
#include "poseidon/errors.h"
#include "poseidon/factor_applier.h"
#include "poseidon/state_record.h"

namespace poseidon {

class Digest;

class LayerSyncer {
 public:
  // What the sync does first when it starts (on the pool, or at once if it runs itself).
  using SendFn = std::function<void()>;

  LayerSyncer(int layer, const char* scheme) : layer_(layer), scheme_(scheme) {}
  virtual ~LayerSyncer() = default;
  int layer() const { return layer_; }
  // The scheme's name, for timelines and messages only.
  const char* scheme() const { return scheme_; }

  // Iteration t's gradient of this layer (or its sufficient factors U, K x M, and V, K x N)
  // is complete: returns the Send to run when the sync starts. What the engine may free
  // before then is copied now; what is sent in place is kept alive by `owner`.
  virtual SendFn gradientsReady(std::uint64_t t, std::vector<float*> grads, std::shared_ptr<const void> owner);
  virtual SendFn factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K);
  // A scheme whose factors travel as one message (SFB): that message, packed at once, and
  // its Send, which factorsReady's SendFn runs. The devices level stacks a node's devices'
  // factors under the leader's in between (node/node_leader_syncer.h).
  virtual Message factorMessage(std::uint64_t t, const float* U, const float* V, std::int64_t K) const;
  virtual void sendFactorMessage(std::uint64_t t, Message factors);
  // Autograd no longer needs this layer's weight in iteration t's backward pass.
  virtual void release(std::uint64_t /*t*/) {}
  // The sync may start only once the weight is released (it writes the weight early).
  virtual bool startsAtRelease() const { return false; }
  // The sync runs in tasks of its own, which mark the layer complete themselves: its Send
  // is called on the compute thread and the pool runs nothing for it.
  virtual bool runsItself() const { return false; }

  // Blocks until everything this layer needs for iteration t has arrived.
  virtual void Receive(std::uint64_t /*t*/) {}
  // Brings the engine's parameters of this layer to their state after iteration t.
  virtual void Move(std::uint64_t /*t*/) {}
  // Before the layer's forward in iteration t, once its last sync is over: a stale read
  // (SSP) waits here until the values have at least `version` steps.
  virtual void beforeRead(std::uint64_t /*version*/, std::uint64_t /*t*/) {}
  // A wait for this layer in iteration t ran out: rethrows `e` naming who is late, if known.
  virtual void explainTimeout(const TimeoutError& /*e*/, std::uint64_t /*t*/) const {}

  // A peer's message for this layer (fresh values of a KV pair, factors): transport thread.
  virtual void deliver(Message message);
  // The co-located shard's fresh values of KV pair `key`, version `version`, are in place.
  virtual void localFresh(std::uint32_t key, std::uint64_t version);

  // Gradient mode: where the mean gradient goes, for a layer autograd computes none for.
  virtual void setGradientTarget(std::vector<float*> grads);
  // The engine applies this layer's factors itself; false where the syncer keeps its own.
  virtual bool setApplier(std::unique_ptr<FactorApplier>& /*applier*/) { return false; }
  // Optimizer state the workers replicate (checkpoints) and its digest (--verify).
  virtual void addStateRecords(std::vector<StateRecord>& /*records*/) {}
  // The replicated momentum was written from a loaded optimizer state: the next step
  // continues it instead of starting it from the gradient. Between iterations.
  virtual void momentumSeeded() {}
  // No rank used the layer in iteration t (DDP's rule: the optimizer skips it): its step
  // leaves it as it is. Before its hand-over; where the scheme steps elsewhere than here.
  virtual void usedByNoRank(std::uint64_t /*t*/) {}
  virtual void addToDigest(Digest& /*digest*/) const {}

  // Bytes this syncer has sent; SSP: the most iterations any read lacked.
  virtual std::uint64_t bytesSent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  virtual std::uint64_t maxStalenessSeen() const { return 0; }

 protected:
  // Fails: `what` was handed to a layer whose scheme does not take it.
  [[noreturn]] void refuse(const char* what) const;

  // Written by the pool thread running this syncer, read by the compute thread (the
  // timeline's bytes per iteration, plan()): a counter, so relaxed atomics suffice.
  std::atomic<std::uint64_t> bytes_sent_{0};

 private:
  const int layer_;
  const char* const scheme_;
};

}  // namespace poseidon
