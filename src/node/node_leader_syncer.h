// The devices level around any scheme's syncer, on a node's leader (the 2015 paper's
// three levels: devices inside a node, then the network): before the layer's exchange the
// node's devices' gradients are added to the leader's (their factors stacked under its
// own), and after it the layer's result is shared with them. The schemes' syncers know
// nothing of nodes; the client wraps each of a leader's syncers in one of these.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sync/layer_syncer.h"

namespace poseidon {

class NodeStage;

class NodeLeaderSyncer final : public LayerSyncer {
 public:
  NodeLeaderSyncer(std::unique_ptr<LayerSyncer> inner, NodeStage& node);

  // The node's gradients (factors) go on under the inner scheme's Send.
  SendFn gradientsReady(std::uint64_t t, std::vector<float*> grads, std::shared_ptr<const void> owner) override;
  SendFn factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K) override;
  // The inner scheme's result, then the node's devices get it.
  void Move(std::uint64_t t) override;
  // The devices' mean gradient goes where the leader's does.
  void setGradientTarget(std::vector<float*> grads) override;
  // The leader keeps the host values, which it shares with its devices after each step.
  bool setApplier(std::unique_ptr<FactorApplier>& /*applier*/) override { return false; }

  // The rest is the inner scheme's.
  void release(std::uint64_t t) override { inner_->release(t); }
  bool startsAtRelease() const override { return inner_->startsAtRelease(); }
  bool runsItself() const override { return inner_->runsItself(); }
  void Receive(std::uint64_t t) override { inner_->Receive(t); }
  void beforeRead(std::uint64_t version, std::uint64_t t) override { inner_->beforeRead(version, t); }
  void explainTimeout(const TimeoutError& e, std::uint64_t t) const override { inner_->explainTimeout(e, t); }
  void deliver(Message message) override { inner_->deliver(std::move(message)); }
  void localFresh(std::uint32_t key, std::uint64_t version) override { inner_->localFresh(key, version); }
  void addStateRecords(std::vector<StateRecord>& records) override { inner_->addStateRecords(records); }
  void momentumSeeded() override { inner_->momentumSeeded(); }
  void usedByNoRank(std::uint64_t t) override { inner_->usedByNoRank(t); }
  void addToDigest(Digest& digest) const override { inner_->addToDigest(digest); }
  std::uint64_t bytesSent() const override { return inner_->bytesSent(); }
  std::uint64_t maxStalenessSeen() const override { return inner_->maxStalenessSeen(); }

 private:
  const std::unique_ptr<LayerSyncer> inner_;
  NodeStage& node_;
};

}  // namespace poseidon
