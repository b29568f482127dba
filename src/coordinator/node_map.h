// The 2015 paper's three levels: servers, worker nodes, and devices inside a node. Ranks on
// one machine (one per device) form a node; a node's devices aggregate first, and only its
// leader (the node's first rank) takes part in the network exchange. Nodes are blocks of
// consecutive ranks, all the same size (mpirun's default placement gives that).
#pragma once

#include <string>
#include <vector>

namespace poseidon {

class NodeMap {
 public:
  // Every rank is a node of its own (flat: the network sees every rank).
  static NodeMap flat(int ranks) { return NodeMap(ranks, 1); }
  // Ranks 0..D-1 form node 0, D..2D-1 node 1, and so on. Throws InputError unless D
  // divides the rank count.
  static NodeMap blocks(int ranks, int devices_per_node);
  // Ranks with the same key (a host name, or POSEIDON_NODE) form a node. Throws
  // InputError unless every node is a block of consecutive ranks of one common size.
  static NodeMap fromKeys(const std::vector<std::string>& keys);

  int ranks() const { return ranks_; }
  int nodes() const { return ranks_ / per_node_; }
  int devicesPerNode() const { return per_node_; }
  bool hierarchical() const { return per_node_ > 1; }
  int nodeOf(int rank) const { return rank / per_node_; }
  int leader(int node) const { return node * per_node_; }
  bool isLeader(int rank) const { return rank % per_node_ == 0; }
  bool sameNode(int a, int b) const { return nodeOf(a) == nodeOf(b); }
  // The ranks of a node other than its leader, in rank order.
  std::vector<int> devicesBesideLeader(int node) const;
  std::string describe() const;

 private:
  NodeMap(int ranks, int per_node) : ranks_(ranks), per_node_(per_node) {}
  int ranks_;
  int per_node_;
};

// What names this rank's node: $POSEIDON_NODE (set by `poseidon lab --ranks-per-node`), or
// the host name.
std::string nodeKeyOfThisProcess();

}  // namespace poseidon
