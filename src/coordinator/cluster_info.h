// Cluster information: which ranks are workers and which hold a parameter-server shard.
// By default every rank is a worker and holds one shard (the paper's co-located setup);
// the last `server_only` ranks may instead be servers that do not train.
#pragma once

namespace poseidon {

class ClusterInfo {
 public:
  // Throws InputError when the numbers cannot describe a job of `ranks` ranks.
  ClusterInfo(int ranks, int server_only, int shards);

  int ranks() const { return ranks_; }
  int workers() const { return ranks_ - server_only_; }
  int shards() const { return shards_; }
  int serverOnly() const { return server_only_; }
  bool isWorker(int rank) const { return rank < workers(); }
  // Shards sit on the last `shards` ranks, so server-only ranks always hold one.
  bool hasShard(int rank) const { return rank >= ranks_ - shards_; }
  int shardRank(int shard) const { return ranks_ - shards_ + shard; }
  int shardOf(int rank) const { return rank - (ranks_ - shards_); }

 private:
  int ranks_;
  int server_only_;
  int shards_;
};

}  // namespace poseidon
