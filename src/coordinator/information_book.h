// The information book (ATC'17 §4.1): how every parameter tensor is cut into KV pairs of
// at most `max_pair_bytes` and which server shard holds each pair. Built by a
// deterministic algorithm from the model and cluster information, so it is identical on
// every rank without being sent anywhere; ranks compare its digest at start-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/cluster_info.h"
#include "poseidon/model_info.h"
#include "poseidon/options.h"

namespace poseidon {

struct KVPair {
  std::uint32_t key = 0;
  int layer = 0;
  int tensor = 0;           // index within the layer's tensors
  std::int64_t offset = 0;  // first float of the tensor this pair covers
  std::int64_t length = 0;  // floats
  int shard = 0;
};

class InformationBook {
 public:
  // `on_ps[l]` says whether layer l goes through the parameter server; layers that do not
  // (SFB) get no KV pairs. Empty means every layer does.
  InformationBook(const ModelInfo& model, const ClusterInfo& cluster, std::int64_t max_pair_bytes,
                  const std::vector<bool>& on_ps = {});

  const ModelInfo& model() const { return model_; }
  const ClusterInfo& cluster() const { return cluster_; }
  const std::vector<KVPair>& pairs() const { return pairs_; }
  const KVPair& pair(std::uint32_t key) const { return pairs_.at(key); }
  // Keys of one layer, contiguous and in tensor order.
  const std::vector<std::uint32_t>& pairsOfLayer(int layer) const { return by_layer_.at(layer); }
  const std::vector<std::uint32_t>& pairsOfShard(int shard) const { return by_shard_.at(shard); }
  std::int64_t shardBytes(int shard) const;
  std::string digest() const;

 private:
  ModelInfo model_;
  ClusterInfo cluster_;
  std::vector<KVPair> pairs_;
  std::vector<std::vector<std::uint32_t>> by_layer_;
  std::vector<std::vector<std::uint32_t>> by_shard_;
};

}  // namespace poseidon
