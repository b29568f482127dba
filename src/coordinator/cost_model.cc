#include "coordinator/cost_model.h"

#include <algorithm>

#include "common/names.h"

namespace poseidon {

const char* schemeName(Scheme scheme) {
  static constexpr NameTable<Scheme, 5> kSchemes{{{Scheme::kPS, "ps"},
                                                  {Scheme::kSFB, "sfb"},
                                                  {Scheme::kFactorPush, "factor-push"},
                                                  {Scheme::kAllreduce, "allreduce"},
                                                  {Scheme::kRows, "rows"}}};
  return nameIn(kSchemes, scheme);
}

double CostModel::factorPushFloats(std::int64_t M, std::int64_t N, std::int64_t K) {
  return static_cast<double>(K) * static_cast<double>(M + N) + static_cast<double>(M) * static_cast<double>(N);
}

double CostModel::rowsFloats(std::int64_t rows, std::int64_t width, int P1) {
  return 2.0 * (P1 - 1) * static_cast<double>(rows) * static_cast<double>(width + 1);
}

double CostModel::allreduceFloats(std::int64_t M, std::int64_t N, int P1) {
  return 2.0 * 2.0 * static_cast<double>(M) * static_cast<double>(N) * (P1 - 1) / P1;
}

double CostModel::psFloats(std::int64_t M, std::int64_t N, int P1, int P2, PsRole role) {
  const double mn = static_cast<double>(M) * static_cast<double>(N);
  switch (role) {
    case PsRole::kServerAndWorker:
      return 2.0 * mn * (P1 + P2 - 2) / P2;
    case PsRole::kWorkerOnly:
      return 2.0 * mn;
    case PsRole::kServerOnly:
      return 2.0 * P1 * mn / P2;
  }
  return 0.0;
}

double CostModel::sfbFloats(std::int64_t M, std::int64_t N, int P1, std::int64_t K) {
  return 2.0 * static_cast<double>(K) * (P1 - 1) * static_cast<double>(M + N);
}

double CostModel::psClusterFloats(std::int64_t M, std::int64_t N, int P) {
  return 2.0 * P * static_cast<double>(M) * static_cast<double>(N);
}

double CostModel::sfbClusterFloats(std::int64_t M, std::int64_t N, int P, std::int64_t K) {
  return static_cast<double>(P - 1) * (P - 1) * static_cast<double>(K) * static_cast<double>(M + N);
}

double CostModel::factorPushClusterFloats(std::int64_t M, std::int64_t N, int P, std::int64_t K) {
  return P * static_cast<double>(K) * static_cast<double>(M + N) + P * static_cast<double>(M) * static_cast<double>(N);
}

Scheme CostModel::bestScheme(const LayerInfo& layer, int P1, int P2, std::int64_t K, PsRole role) {
  if (layer.kind != LayerKind::kFC) return Scheme::kPS;
  return sfbFloats(layer.M, layer.N, P1, K) <= psFloats(layer.M, layer.N, P1, P2, role) ? Scheme::kSFB : Scheme::kPS;
}

double CostModel::psSentFloats(std::int64_t numel, const ClusterInfo& cluster, int rank) {
  const int P1 = cluster.workers();
  const int P2 = cluster.shards();
  PsRole role = PsRole::kServerAndWorker;
  if (!cluster.isWorker(rank))
    role = PsRole::kServerOnly;
  else if (!cluster.hasShard(rank))
    role = PsRole::kWorkerOnly;
  // Table 1's formulas are per M x N matrix; they are linear in M*N, so numel stands in.
  return psFloats(numel, 1, P1, P2, role) / 2.0;
}

double CostModel::psPushedFloats(std::int64_t numel, const ClusterInfo& cluster, int rank) {
  if (!cluster.isWorker(rank)) return 0.0;
  const double n = static_cast<double>(numel);
  // To every shard but this rank's own (a worker-only rank has none).
  return cluster.hasShard(rank) ? n * (cluster.shards() - 1) / cluster.shards() : n;
}

double CostModel::psWireShare(WireFormat pushes, WireFormat updates) {
  return static_cast<double>(wireBytesPerFloat(pushes) + wireBytesPerFloat(updates)) / (2.0 * sizeof(float));
}

double predictedBytesSent(const InformationBook& book, Scheme scheme, int l, int rank, std::int64_t K,
                          WireFormat pushes, WireFormat updates, WireFormat replicated) {
  const auto& cluster = book.cluster();
  const LayerInfo& li = book.model().layers[l];
  K *= li.rows_per_example;  // factor rows: a Linear on [B, T, N] makes B * T
  const auto replicated_bytes = static_cast<double>(wireBytesPerFloat(replicated));
  if (scheme == Scheme::kSFB) return CostModel::sfbFloats(li.M, li.N, cluster.workers(), K) / 2 * replicated_bytes;
  if (scheme == Scheme::kPS) {
    const double pushed = CostModel::psPushedFloats(li.numel(), cluster, rank);
    const double values = CostModel::psSentFloats(li.numel(), cluster, rank) - pushed;
    return values * static_cast<double>(wireBytesPerFloat(updates)) +
           pushed * static_cast<double>(wireBytesPerFloat(pushes));
  }
  // Half of the cost model's sent + received: 2 (P-1)/P of the layer, sent, in the sums' width.
  if (scheme == Scheme::kRows) {
    const std::int64_t width = li.tensors.empty() ? 0 : li.numel() / std::max<std::int64_t>(1, li.tensors[0].shape[0]);
    return CostModel::rowsFloats(li.rows_touched, width, cluster.workers()) / 2 * sizeof(float);
  }
  if (scheme == Scheme::kAllreduce)
    return CostModel::allreduceFloats(li.numel(), 1, cluster.workers()) / 2 * replicated_bytes;
  // Factor push with sharded servers: the factors go to every other shard that holds a pair of
  // the layer; as a server, this rank sends its pairs' fresh values to the other workers.
  std::vector<bool> shard_used(cluster.shards(), false);
  double own = 0;
  for (auto key : book.pairsOfLayer(l)) {
    const KVPair& kv = book.pair(key);
    shard_used[kv.shard] = true;
    if (cluster.shardRank(kv.shard) == rank) own += static_cast<double>(kv.length);
  }
  int remote = 0;
  for (int s = 0; s < cluster.shards(); ++s) remote += shard_used[s] && cluster.shardRank(s) != rank ? 1 : 0;
  return (static_cast<double>(K) * (li.M + li.N) * remote + own * (cluster.workers() - 1)) * sizeof(float);
}

}  // namespace poseidon
