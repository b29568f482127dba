// The network between node leaders, as a transport of its own: rank n is node n's leader,
// so the parameter servers, their clients and SFB, which number workers and shards from 0,
// run unchanged with one participant per node. Sends go out through the world transport
// (its bandwidth manager is the node's: only the leader sends over the network);
// delivery stays with the world transport, whose dispatcher routes by message type.
#pragma once

#include "comm/transport.h"
#include "coordinator/node_map.h"

namespace poseidon {

class NodeTransport final : public Transport {
 public:
  NodeTransport(Transport& world, const NodeMap& nodes);

  int rank() const override { return nodes_.nodeOf(world_.rank()); }
  int size() const override { return nodes_.nodes(); }
  void start(TransportCallbacks /*callbacks*/) override {}
  std::shared_ptr<Work> send(int peer, Message message) override;
  // Among the leaders alone: the allreduce layers' collectives cross the network once per node.
  CollectiveChannel newCollectiveChannel(const std::vector<int>* members, std::chrono::milliseconds timeout) override;
  void stop() override {}
  SendQueueStats sendStats() const override { return world_.sendStats(); }

 private:
  Transport& world_;
  const NodeMap nodes_;
};

}  // namespace poseidon
