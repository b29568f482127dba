#include "coordinator/information_book.h"

#include <algorithm>
#include <numeric>

#include "common/digest.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

namespace {
// A tensor at least this large per shard is cut into a multiple of the shard count, so
// that large layers spread evenly; smaller ones stay whole to keep messages few.
constexpr std::int64_t kMinSplitBytesPerShard = 16 << 10;
}  // namespace

InformationBook::InformationBook(const ModelInfo& model, const ClusterInfo& cluster, std::int64_t max_pair_bytes,
                                 const std::vector<bool>& on_ps)
    : model_(model), cluster_(cluster) {
  if (max_pair_bytes < static_cast<std::int64_t>(sizeof(float))) {
    throw OptionError(detail::cat("{kv_pair_bytes=", max_pair_bytes, "} is too small: a pair holds at least one float"));
  }
  const int shards = cluster.shards();
  const std::int64_t max_floats = max_pair_bytes / static_cast<std::int64_t>(sizeof(float));
  by_layer_.resize(model.layers.size());
  by_shard_.resize(shards);

  // 1. Cut every tensor into equal pieces of at most max_floats.
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const auto& layer = model.layers[l];
    if (!on_ps.empty() && !on_ps.at(l)) continue;
    for (std::size_t t = 0; t < layer.tensors.size(); ++t) {
      const std::int64_t n = layer.tensors[t].numel();
      if (n == 0) continue;
      std::int64_t pieces = (n + max_floats - 1) / max_floats;
      if (n * static_cast<std::int64_t>(sizeof(float)) >= shards * kMinSplitBytesPerShard) {
        pieces = (pieces + shards - 1) / shards * shards;
      }
      pieces = std::min(pieces, n);
      const std::int64_t base = n / pieces;
      const std::int64_t extra = n % pieces;
      std::int64_t offset = 0;
      for (std::int64_t p = 0; p < pieces; ++p) {
        KVPair kv;
        kv.key = static_cast<std::uint32_t>(pairs_.size());
        kv.layer = static_cast<int>(l);
        kv.tensor = static_cast<int>(t);
        kv.offset = offset;
        kv.length = base + (p < extra ? 1 : 0);
        offset += kv.length;
        by_layer_[l].push_back(kv.key);
        pairs_.push_back(kv);
      }
    }
  }

  // 2. Longest-processing-time placement: biggest pairs first, each onto the least-loaded
  // shard (ties to the lowest shard id). Deterministic, and within one pair of even.
  std::vector<std::uint32_t> order(pairs_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return pairs_[a].length > pairs_[b].length; });
  std::vector<std::int64_t> load(shards, 0);
  for (std::uint32_t key : order) {
    const int s = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    pairs_[key].shard = s;
    load[s] += pairs_[key].length;
  }
  for (const auto& kv : pairs_) by_shard_[kv.shard].push_back(kv.key);
}

std::int64_t InformationBook::shardBytes(int shard) const {
  std::int64_t floats = 0;
  for (auto key : by_shard_.at(shard)) floats += pairs_[key].length;
  return floats * static_cast<std::int64_t>(sizeof(float));
}

std::string InformationBook::digest() const {
  Digest d;
  d.update(model_.describe());
  for (const auto& kv : pairs_) {
    const std::int64_t fields[] = {kv.key, kv.layer, kv.tensor, kv.offset, kv.length, kv.shard};
    d.update(fields, sizeof(fields));
  }
  return d.hex();
}

}  // namespace poseidon
