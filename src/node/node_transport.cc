#include "node/node_transport.h"

#include "poseidon/errors.h"

namespace poseidon {

NodeTransport::NodeTransport(Transport& world, const NodeMap& nodes) : world_(world), nodes_(nodes) {
  POSEIDON_ENFORCE(nodes.isLeader(world.rank()), "the leaders' transport on rank ", world.rank(), ", not a leader");
}

std::shared_ptr<Work> NodeTransport::send(int peer, Message message) {
  if (peer < 0 || peer >= size()) throw CommError(detail::cat("send to node ", peer, " but the job has ", size()));
  return world_.send(nodes_.leader(peer), std::move(message));
}

CollectiveChannel NodeTransport::newCollectiveChannel(const std::vector<int>* members,
                                                      std::chrono::milliseconds timeout) {
  // Nodes are ranks of the leaders' transport: node n is the world's rank leader(n).
  std::vector<int> leaders;
  if (members == nullptr) {
    for (int n = 0; n < nodes_.nodes(); ++n) leaders.push_back(nodes_.leader(n));
  } else {
    for (int n : *members) leaders.push_back(nodes_.leader(n));
  }
  return world_.newCollectiveChannel(&leaders, timeout);
}

}  // namespace poseidon
