#include "node/node_leader_syncer.h"

#include "node/node_stage.h"

namespace poseidon {

NodeLeaderSyncer::NodeLeaderSyncer(std::unique_ptr<LayerSyncer> inner, NodeStage& node)
    : LayerSyncer(inner->layer(), inner->scheme()), inner_(std::move(inner)), node_(node) {}

LayerSyncer::SendFn NodeLeaderSyncer::gradientsReady(std::uint64_t t, std::vector<float*> grads,
                                                     std::shared_ptr<const void> owner) {
  // On the pool, when the sync starts: the devices' shares may still be arriving.
  SendFn send = inner_->gradientsReady(t, grads, std::move(owner));
  return [this, t, grads = std::move(grads), send = std::move(send)] {
    node_.addDeviceGradients(layer(), t, grads);
    send();
  };
}

LayerSyncer::SendFn NodeLeaderSyncer::factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K) {
  // Packed now: the engine's factor tensors may be gone by the time the sync runs.
  auto own = std::make_shared<Message>(inner_->factorMessage(t, U, V, K));
  return [this, t, own] { inner_->sendFactorMessage(t, node_.stackDeviceFactors(layer(), t, std::move(*own))); };
}

void NodeLeaderSyncer::Move(std::uint64_t t) {
  inner_->Move(t);
  node_.share(layer(), t);
}

void NodeLeaderSyncer::setGradientTarget(std::vector<float*> grads) {
  node_.setGradientTarget(layer(), grads);
  inner_->setGradientTarget(std::move(grads));
}

}  // namespace poseidon
