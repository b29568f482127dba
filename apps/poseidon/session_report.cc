#include "session_report.h"

#include "bandwidth/send_policy.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "checkpoint/state_file.h"
#include "comm/control_channel.h"
#include "common/timeline.h"
#include "coordinator/cost_model.h"
#include "coordinator/information_book.h"
#include "coordinator/scheme_planner.h"
#include "poseidon/errors.h"

namespace poseidon::app {

namespace {

// A count that rank `rank` sent as decimal text (std::to_string of a u64); CommError naming
// the rank when it is anything else, where std::stoull would throw std::invalid_argument,
// take a sign ("-1" as 2^64 - 1) or ignore trailing bytes.
std::uint64_t peerCount(const std::string& text, int rank, const char* what) {
  const bool digits = !text.empty() && text.size() <= 20 &&
                      std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  std::uint64_t v = 0;
  bool fits = digits;
  for (std::size_t i = 0; fits && i < text.size(); ++i) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    fits = v <= (UINT64_MAX - d) / 10;
    v = v * 10 + d;
  }
  if (!fits) {
    throw CommError(detail::cat("rank ", rank, " sent a malformed ", what, " count '", text.substr(0, 40),
                                text.size() > 40 ? "...'" : "'", " (expected a decimal number)"));
  }
  return v;
}

// What the cost model says rank `rank` sends per iteration for layer l under `scheme`.
double modelBytesSent(const InformationBook& book, Scheme scheme, int l, int rank, std::int64_t K) {
  const auto& cluster = book.cluster();
  const LayerInfo& li = book.model().layers[l];
  K *= li.rows_per_example;  // factor rows: a Linear on [B, T, N] makes B * T
  if (scheme == Scheme::kSFB) return CostModel::sfbFloats(li.M, li.N, cluster.workers(), K) / 2 * sizeof(float);
  if (scheme == Scheme::kPS) return CostModel::psSentFloats(li.numel(), cluster, rank) * sizeof(float);
  // Half of the cost model's sent + received: 2 (P-1)/P of the layer, sent.
  if (scheme == Scheme::kAllreduce)
    return CostModel::allreduceFloats(li.numel(), 1, cluster.workers()) / 2 * sizeof(float);
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

}  // namespace

static void gatherSendQueueFigures(TrainReport& report, Session& session) {
  const SendQueueStats q = session.sendQueueStats();
  const auto sum = session.control().allreduceSum({static_cast<double>(q.messages), q.wait_seconds}, "send queues");
  report.queued_messages = static_cast<std::uint64_t>(sum[0]);
  report.queue_wait_ms_mean = sum[0] > 0 ? 1e3 * sum[1] / sum[0] : 0;
  // Each rank's longest wait, in whole microseconds, as the largest of their counts.
  const auto longest = session.control().allgather(std::to_string(static_cast<long long>(q.max_wait_seconds * 1e6)),
                                                   "longest queue wait");
  for (std::size_t r = 0; r < longest.size(); ++r) {
    report.queue_wait_ms_max =
        std::max(report.queue_wait_ms_max, peerCount(longest[r], static_cast<int>(r), "queue wait") / 1e3);
  }
}

BytesSent bytesSentSoFar(Session& session) {
  BytesSent b;
  b.total = session.bytesSent();
  for (std::size_t l = 0; l < session.book().model().layers.size(); ++l) {
    b.layers.push_back(session.bytesSentForLayer(static_cast<int>(l)));
  }
  return b;
}

void gatherSessionFigures(TrainReport& report, Session& session, const ModelInfo& info, const BytesSent& before,
                          double iterations, bool worker, double last_loss) {
  const int workers = session.workers();
  // Bytes are per network participant: a worker when flat, a node with devices (whose
  // leader alone sends over the network, for the node's whole batch).
  const bool nodes = session.devicesPerNode() > 1;
  const int senders = nodes ? session.nodes() : workers;
  const int net_rank = session.networkRank();
  const std::int64_t K = report.batch * session.devicesPerNode();
  const int L = static_cast<int>(info.layers.size());
  // Per worker: loss, then per layer the bytes sent and the cost model's figure for what
  // a node sends under the layer's scheme.
  std::vector<double> mine(1 + 2 * L, 0.0);
  if (worker) {
    mine[0] = last_loss;
    for (int l = 0; l < L && net_rank >= 0; ++l) {
      mine[1 + 2 * l] = (session.bytesSentForLayer(l) - before.layers[l]) / iterations;
      mine[2 + 2 * l] = modelBytesSent(session.book(), session.plan()[l].scheme, l, net_rank, K);
    }
  }
  const auto sum = session.control().allreduceSum(mine, "final statistics");
  report.train_loss = sum[0] / workers;
  for (int l = 0; l < L; ++l) {
    const auto& li = info.layers[l];
    const auto& plan = session.plan()[l];
    LayerReport lr{li.name,
                   layerKindName(li.kind),
                   li.M,
                   li.N,
                   li.numel(),
                   schemeName(plan.scheme),
                   sum[1 + 2 * l] / senders,
                   sum[2 + 2 * l] / senders,
                   plan.reason};
    report.bytes_model_per_iter += lr.bytes_model_per_iter;
    report.layers.push_back(lr);
  }
  const auto all =
      session.control().allreduceSum({worker ? (session.bytesSent() - before.total) / iterations : 0.0}, "bytes sent");
  report.bytes_sent_per_iter = all[0] / senders;
  report.bytes_per_node = nodes;
  const auto stragglers = session.control().allreduceSum(
      {static_cast<double>(session.droppedUpdates()), static_cast<double>(session.lateUpdates())}, "stragglers");
  report.dropped_updates = static_cast<std::uint64_t>(stragglers[0]);
  report.late_updates = static_cast<std::uint64_t>(stragglers[1]);
  gatherSendQueueFigures(report, session);
  const auto seen = session.control().allgather(std::to_string(session.maxStalenessSeen()), "staleness");
  for (std::size_t r = 0; r < seen.size(); ++r) {
    report.max_staleness_seen =
        std::max<std::uint64_t>(report.max_staleness_seen, peerCount(seen[r], static_cast<int>(r), "staleness"));
  }
}

void checkDigestsAgree(Session& session, const std::string& digest) {
  const auto digests = session.control().allgather(digest, "final parameter digests");
  for (int r = 0; r < session.workers(); ++r) {
    if (digests[r] != digests[0]) {
      throw Error(detail::cat("parameters differ across ranks after training: rank 0 has digest ", digests[0],
                              ", rank ", r, " has ", digests[r]));
    }
  }
}

void writeTimeline(Session& session, const std::string& path, const std::string& model) {
  const auto all = session.control().allgather(session.timeline()->events(), "timeline");
  if (session.rank() != 0) return;
  std::string text = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"" + model +
                     "\",\"ranks\":" + std::to_string(all.size()) + ",\"compute\":\"real\"},\"traceEvents\":[\n";
  for (std::size_t r = 0; r < all.size(); ++r) text += (r ? ",\n" : "") + all[r];
  text += "\n]}\n";
  writeFileAtomically(path, text);  // a reader never sees half a file
  std::printf("poseidon: timeline written to %s (open it in https://ui.perfetto.dev or chrome://tracing)\n",
              path.c_str());
}

}  // namespace poseidon::app
