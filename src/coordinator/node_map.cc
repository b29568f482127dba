#include "coordinator/node_map.h"

#include <unistd.h>

#include <cstdlib>

#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

NodeMap NodeMap::blocks(int ranks, int devices_per_node) {
  if (devices_per_node < 1 || ranks % devices_per_node != 0) {
    throw OptionError(detail::cat("{devices_per_node=", devices_per_node, "}: the job's ", ranks,
                                  " ranks must split into nodes of that many ranks each"));
  }
  return NodeMap(ranks, devices_per_node);
}

NodeMap NodeMap::fromKeys(const std::vector<std::string>& keys) {
  const int ranks = static_cast<int>(keys.size());
  int per_node = 1;
  while (per_node < ranks && keys[per_node] == keys[0]) ++per_node;
  if (ranks % per_node != 0) {
    throw InputError(detail::cat("node '", keys[0], "' has ", per_node, " ranks, which does not divide the job's ",
                                 ranks, ": give every node the same number of ranks"));
  }
  for (int r = 0; r < ranks; ++r) {
    const int first = r - r % per_node;
    const bool same = keys[r] == keys[first];
    const bool fresh = r % per_node != 0 || first == 0 || keys[r] != keys[first - 1];
    if (!same || !fresh) {
      throw InputError(detail::cat("rank ", r, " is on node '", keys[r], "', which breaks nodes of ", per_node,
                                   " consecutive ranks; place ranks by node (mpirun --map-by slot) with the same "
                                   "number on each node"));
    }
  }
  for (int a = 0; a < ranks; a += per_node) {
    for (int b = 0; b < a; b += per_node) {
      if (keys[a] == keys[b]) {
        throw InputError(detail::cat("node '", keys[a], "' holds ranks ", b, " and ", a,
                                     " but not those between; place ranks by node (mpirun --map-by slot)"));
      }
    }
  }
  return NodeMap(ranks, per_node);
}

std::vector<int> NodeMap::devicesBesideLeader(int node) const {
  std::vector<int> out;
  for (int r = leader(node) + 1; r < leader(node) + per_node_; ++r) out.push_back(r);
  return out;
}

std::string NodeMap::describe() const {
  return detail::cat(nodes(), " node", nodes() == 1 ? "" : "s", " x ", per_node_, " device", per_node_ == 1 ? "" : "s");
}

std::string nodeKeyOfThisProcess() {
  if (const char* n = std::getenv("POSEIDON_NODE"); n != nullptr && *n != '\0') return n;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

}  // namespace poseidon
