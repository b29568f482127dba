#include "sync/layer_syncer.h"

namespace poseidon {

LayerSyncer::SendFn LayerSyncer::gradientsReady(std::uint64_t, std::vector<float*>, std::shared_ptr<const void>) { refuse("a dense gradient"); }

LayerSyncer::SendFn LayerSyncer::factorsReady(std::uint64_t, const float*, const float*, std::int64_t) {
  refuse("sufficient factors");
}

Message LayerSyncer::factorMessage(std::uint64_t, const float*, const float*, std::int64_t) const {
  refuse("sufficient factors as one message");
}

void LayerSyncer::sendFactorMessage(std::uint64_t, Message) { refuse("a message of factors"); }

void LayerSyncer::deliver(Message message) {
  // A peer that planned this layer otherwise: its messages cannot be read here.
  throw CommError(detail::cat("rank ", message.header().source, " sent a message of type ",
                              static_cast<int>(message.header().type), " for layer ", layer_, ", which goes by ",
                              scheme_, " here: the ranks' plans differ"));
}

void LayerSyncer::localFresh(std::uint32_t, std::uint64_t) { refuse("fresh values from the co-located shard"); }

void LayerSyncer::setGradientTarget(std::vector<float*>) { refuse("a gradient target for its factors"); }

void LayerSyncer::refuse(const char* what) const {
  throw Error(detail::cat("layer ", layer_, " goes by ", scheme_, " and takes no ", what));
}

}  // namespace poseidon
