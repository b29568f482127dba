// What a Poseidon session measured, gathered from every rank into `poseidon train`'s
// report (rank 0 prints it): bytes per layer against the cost model, straggler and
// staleness figures, the cross-rank parameter check, the Chrome trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/model_info.h"
#include "poseidon/session.h"
#include "report.h"

namespace poseidon::app {

// Bytes this rank has sent so far, in all and per layer (a run measures the difference).
struct BytesSent {
  std::uint64_t total = 0;
  std::vector<std::uint64_t> layers;
};
BytesSent bytesSentSoFar(Session& session);

// Collective (every rank, workers and servers): fills the report's train loss (mean over
// workers), layers, bytes, straggler and staleness figures. `iterations`: those this run
// trained; `before`: the counts at its start.
void gatherSessionFigures(TrainReport& report, Session& session, const ModelInfo& info, const BytesSent& before,
                          double iterations, bool worker, double last_loss);

// Collective: every worker must end with the same digest; a difference is a bug, not noise
// (a server-only rank's digest is not compared: it holds fresh values of its shard only).
void checkDigestsAgree(Session& session, const std::string& digest);

// Collective: every rank's timeline events into one Chrome trace, written by rank 0.
void writeTimeline(Session& session, const std::string& path, const std::string& model);

}  // namespace poseidon::app
