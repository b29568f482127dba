#include "session_report.h"

#include "bandwidth/send_policy.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "checkpoint/state_file.h"
#include "coordinator/cost_model.h"
#include "coordinator/scheme_planner.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"

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

}  // namespace

static void gatherSendQueueFigures(TrainReport& report, Session& session) {
  const SendQueueStats q = session.stats().send_queue;
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
  SessionStats stats = session.stats();
  b.total = stats.bytes_sent;
  b.layers = std::move(stats.bytes_sent_by_layer);
  return b;
}

void gatherSessionFigures(TrainReport& report, Session& session, const ModelInfo& info, const BytesSent& before,
                          double iterations, bool worker, double last_loss) {
  const SessionLayout& layout = session.layout();
  const SessionStats stats = session.stats();
  const int workers = layout.workers;
  // Bytes are per network participant: a worker when flat, a node with devices (whose
  // leader alone sends over the network, for the node's whole batch).
  const bool nodes = layout.devices_per_node > 1;
  const int senders = nodes ? layout.nodes : workers;
  const int net_rank = layout.network_rank;
  const int L = static_cast<int>(info.layers.size());
  // Per worker: loss, then per layer the bytes sent and the cost model's figure for what
  // a node sends under the layer's scheme.
  std::vector<double> mine(1 + 2 * L, 0.0);
  if (worker) {
    mine[0] = last_loss;
    for (int l = 0; l < L && net_rank >= 0; ++l) {
      mine[1 + 2 * l] = (stats.bytes_sent_by_layer[l] - before.layers[l]) / iterations;
      mine[2 + 2 * l] = stats.predicted_bytes_by_layer[l];
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
  const auto all = session.control().allreduceSum(
      {worker ? (session.stats().bytes_sent - before.total) / iterations : 0.0}, "bytes sent");
  report.bytes_sent_per_iter = all[0] / senders;
  report.bytes_per_node = nodes;
  const auto stragglers = session.control().allreduceSum(
      {static_cast<double>(stats.dropped_updates), static_cast<double>(stats.late_updates)}, "stragglers");
  report.dropped_updates = static_cast<std::uint64_t>(stragglers[0]);
  report.late_updates = static_cast<std::uint64_t>(stragglers[1]);
  gatherSendQueueFigures(report, session);
  const auto seen = session.control().allgather(std::to_string(stats.max_staleness_seen), "staleness");
  for (std::size_t r = 0; r < seen.size(); ++r) {
    report.max_staleness_seen =
        std::max<std::uint64_t>(report.max_staleness_seen, peerCount(seen[r], static_cast<int>(r), "staleness"));
  }
}

void checkDigestsAgree(Session& session, const std::string& digest) {
  const auto digests = session.control().allgather(digest, "final parameter digests");
  for (int r = 0; r < session.layout().workers; ++r) {
    if (digests[r] != digests[0]) {
      throw Error(detail::cat("parameters differ across ranks after training: rank 0 has digest ", digests[0],
                              ", rank ", r, " has ", digests[r]));
    }
  }
}

void writeTimeline(Session& session, const std::string& path, const std::string& model) {
  const auto all = session.control().allgather(session.timeline()->events(), "timeline");
  if (session.layout().rank != 0) return;
  writeFileAtomically(path, chromeTrace(all, model));  // a reader never sees half a file
  std::printf("poseidon: timeline written to %s (open it in https://ui.perfetto.dev or chrome://tracing)\n",
              path.c_str());
}

}  // namespace poseidon::app
