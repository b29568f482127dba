// The paper's communication cost model: floats moved per iteration for one M x N layer.
// ATC'17 Table 1 (per node; counts add what a node sends and what it receives) and the
// 2015 paper's Algorithm 3 (whole cluster). BestScheme picks SFB for an FC layer when it
// moves no more floats than the parameter server.
#pragma once

#include <cstdint>

#include "common/half.h"
#include "coordinator/information_book.h"
#include "poseidon/plan.h"

namespace poseidon {

enum class PsRole { kServerAndWorker, kWorkerOnly, kServerOnly };

struct CostModel {
  // ATC'17, P1 workers, P2 server shards.
  static double psFloats(std::int64_t M, std::int64_t N, int P1, int P2, PsRole role);
  static double sfbFloats(std::int64_t M, std::int64_t N, int P1, std::int64_t K);
  // 2015 paper, whole-cluster counts, P workers.
  static double psClusterFloats(std::int64_t M, std::int64_t N, int P);
  static double sfbClusterFloats(std::int64_t M, std::int64_t N, int P, std::int64_t K);
  static double factorPushClusterFloats(std::int64_t M, std::int64_t N, int P, std::int64_t K);
  // Per node, send + receive: a worker sends its factors and receives the full matrix.
  static double factorPushFloats(std::int64_t M, std::int64_t N, std::int64_t K);
  // Per node, send + receive, ring allreduce of M*N floats over P1 workers: each sends
  // 2*M*N*(P1-1)/P1 (reduce-scatter, then allgather) and receives as much.
  static double allreduceFloats(std::int64_t M, std::int64_t N, int P1);
  // Per node, send + receive, sparse rows: each of P1 workers sends `rows` rows of `width`
  // floats and their indices (one float's bytes each) to every other, and receives theirs.
  static double rowsFloats(std::int64_t rows, std::int64_t width, int P1);

  // ATC'17 Algorithm 1: SFB if the layer is FC and SFB moves no more than PS.
  static Scheme bestScheme(const LayerInfo& layer, int P1, int P2, std::int64_t K, PsRole role);

  // Floats one rank of `cluster` *sends* per iteration under PS for `numel` parameters:
  // half of the Table 1 count, averaged over ranks of the same role.
  static double psSentFloats(std::int64_t numel, const ClusterInfo& cluster, int rank);
  // The part of psSentFloats that is this rank's gradient pushes (the rest: fresh values).
  static double psPushedFloats(std::int64_t numel, const ClusterInfo& cluster, int rank);
  // A PS layer's bytes over its fp32 bytes, pushes going as `pushes` and the values or
  // updates coming back as `updates` (half each way): 0.5 with both in 16 bits.
  static double psWireShare(WireFormat pushes, WireFormat updates);
};

// What the cost model says rank `rank` of the book's cluster sends per iteration for
// layer l under `scheme`, K examples per worker (what a report sets measured bytes beside);
// `pushes`, `updates`: how PS layers push gradients and how their shards send updates back.
// `replicated`: how allreduce layers' sums and SFB layers' factors travel.
double predictedBytesSent(const InformationBook& book, Scheme scheme, int layer, int rank, std::int64_t K,
                          WireFormat pushes = WireFormat::kFp32, WireFormat updates = WireFormat::kFp32,
                          WireFormat replicated = WireFormat::kFp32);

}  // namespace poseidon
