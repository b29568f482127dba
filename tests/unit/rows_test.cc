// Sparse rows: the wire form of one worker's touched rows (sparse/row_message.h), and the
// cost model's choice of sparse rows and of factors for token-limited Linears, and the
// peers' shares a rows (or SFB) syncer keeps (sync/worker_shares.h).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "coordinator/scheme_planner.h"
#include "poseidon/errors.h"
#include "sparse/row_message.h"
#include "sync/worker_shares.h"

namespace poseidon {
namespace {

constexpr std::int64_t kRows = 10, kWidth = 4;

std::vector<float> gradientWithRows(const std::vector<int>& touched) {
  std::vector<float> g(kRows * kWidth, 0.0f);
  for (int r : touched) {
    for (int j = 0; j < kWidth; ++j) g[r * kWidth + j] = static_cast<float>(r + 1) * 0.5f + static_cast<float>(j);
  }
  return g;
}

TEST(RowMessage, SendsOnlyTheTouchedRowsAndAddsThemBack) {
  const auto g = gradientWithRows({1, 7});
  const Message m = packRows(3, 2, 5, g.data(), kRows, kWidth);
  EXPECT_EQ(m.type(), MsgType::kRows);
  EXPECT_EQ(m.layer(), 3u);
  const RowsView v = rowsOf(m, kRows, kWidth);
  ASSERT_FALSE(v.dense);
  ASSERT_EQ(v.count, 2);
  EXPECT_EQ(v.index[0], 1);
  EXPECT_EQ(v.index[1], 7);
  // 8 bytes of prefix, 2 indices, 2 rows: far less than the 40 floats of the layer.
  EXPECT_EQ(m.payloadBytes(), 8u + 2 * 4 + 2 * kWidth * 4);
  std::vector<float> sum(kRows * kWidth, 1.0f);
  addRows(v, sum.data(), kWidth);
  for (std::int64_t i = 0; i < kRows * kWidth; ++i) EXPECT_EQ(sum[i], 1.0f + g[i]) << i;
  std::vector<float> grad = g;
  clearRows(v, grad.data(), kRows, kWidth);
  for (float x : grad) EXPECT_EQ(x, 0.0f);
}

TEST(RowMessage, GoesDenseWhenMostRowsAreTouched) {
  // 9 of 10 rows x (4 + 1 index) = 45 > 40 floats: the whole gradient is smaller.
  const auto g = gradientWithRows({0, 1, 2, 3, 4, 5, 6, 7, 8});
  const Message m = packRows(0, 0, 0, g.data(), kRows, kWidth);
  const RowsView v = rowsOf(m, kRows, kWidth);
  EXPECT_TRUE(v.dense);
  EXPECT_EQ(v.count, kRows);
  std::vector<float> sum(kRows * kWidth, 0.0f);
  addRows(v, sum.data(), kWidth);
  EXPECT_EQ(std::memcmp(sum.data(), g.data(), g.size() * sizeof(float)), 0);
}

TEST(RowMessage, AnUnusedLayerSendsNoRows) {
  const auto g = gradientWithRows({});
  const RowsView v = rowsOf(packRows(0, 0, 0, g.data(), kRows, kWidth), kRows, kWidth);
  EXPECT_FALSE(v.dense);
  EXPECT_EQ(v.count, 0);
}

TEST(RowMessage, RefusesMalformedRows) {
  const auto g = gradientWithRows({2, 4});
  Message m = packRows(0, 1, 0, g.data(), kRows, kWidth);
  EXPECT_THROW(rowsOf(m, kRows, kWidth + 1), CommError);  // another width: the size does not fit
  EXPECT_THROW(rowsOf(m, 3, kWidth), CommError);          // index 4 of a 3-row layer
  auto* index = reinterpret_cast<std::int32_t*>(m.payload() + 8);
  index[1] = 2;  // not ascending: a row twice
  EXPECT_THROW(rowsOf(m, kRows, kWidth), CommError);
}

ModelInfo lookupAndLinear(std::int64_t rows_touched, std::int64_t rows_per_example) {
  ModelInfo m;
  m.name = "lm";
  LayerInfo embed{"embed", LayerKind::kOther, {{"weight", {32000, 256}}}};
  embed.rows_touched = rows_touched;
  LayerInfo proj{"proj", LayerKind::kFC, {{"weight", {256, 256}}}, 256, 256};
  proj.rows_per_example = rows_per_example;
  m.layers = {embed, proj};
  return m;
}

PlanRequest request(std::int64_t batch) {
  PlanRequest r{SchemeMode::kAuto, CostRule::kBytes, batch, {}};
  r.allreduce_on_ties = true;
  r.sparse_rows = true;
  return r;
}

TEST(RowsPlan, AnEmbeddingGoesByRowsWhileItsBatchTouchesFewRows) {
  const ClusterInfo cluster(4, 0, 0);
  // 600 rows touched of 32000: 2 x 3 x 600 x 257 floats against the ring's 4 x 32000 x 256 x 3/4.
  auto plan = planSchemes(lookupAndLinear(600, 128), cluster, request(8));
  EXPECT_EQ(plan[0].scheme, Scheme::kRows);
  EXPECT_EQ(plan[0].rows_floats, 2.0 * 3 * 600 * 257);
  EXPECT_NE(plan[0].reason.find("rows"), std::string::npos) << plan[0].reason;
  // 16000 rows: more than the dense ring moves.
  plan = planSchemes(lookupAndLinear(16000, 128), cluster, request(8));
  EXPECT_EQ(plan[0].scheme, Scheme::kAllreduce);
  // Not a lookup (rows_touched 0), not asked for (SSP, a node's leaders), or forced: dense.
  EXPECT_EQ(planSchemes(lookupAndLinear(0, 128), cluster, request(8))[0].scheme, Scheme::kAllreduce);
  PlanRequest off = request(8);
  off.sparse_rows = false;
  EXPECT_EQ(planSchemes(lookupAndLinear(600, 128), cluster, off)[0].scheme, Scheme::kAllreduce);
  off = request(8);
  off.mode = SchemeMode::kPS;
  EXPECT_EQ(planSchemes(lookupAndLinear(600, 128), cluster, off)[0].scheme, Scheme::kPS);
}

TEST(RowsPlan, NotForATableWhoseWholeGradientOverflowsOneMessage) {
  // 300000 x 256 floats: 307 MB, over the 256 MiB a transport takes in one message, which a
  // worker whose step touched most rows would send.
  ModelInfo m;
  m.name = "big";
  LayerInfo embed{"embed", LayerKind::kOther, {{"weight", {300000, 256}}}};
  embed.rows_touched = 600;
  m.layers = {embed};
  EXPECT_EQ(planSchemes(m, ClusterInfo(4, 0, 0), request(8))[0].scheme, Scheme::kAllreduce);
}

TEST(RowsPlan, ALinearGoesByFactorsOnlyWhileItsTokensAreFew) {
  const ClusterInfo cluster(4, 0, 0);
  // 8 sequences x 128 tokens per worker: K = 1024 factor rows, 2 K (P1-1)(M+N) = 3.1M floats
  // against the matrix's 4 x 65536 x 3/4: dense.
  EXPECT_EQ(planSchemes(lookupAndLinear(600, 128), cluster, request(8))[1].scheme, Scheme::kAllreduce);
  // A small fine-tuning batch, 2 sequences x 8 tokens: K = 16, 49152 floats: factors win.
  const auto few = planSchemes(lookupAndLinear(600, 8), cluster, request(2));
  EXPECT_EQ(few[1].scheme, Scheme::kSFB);
  EXPECT_EQ(few[1].sfb_floats, 2.0 * 16 * 3 * (256 + 256));
}

// What a syncer that steps its own replica (rows, SFB) keeps of its peers' shares
// (sync/worker_shares.h): BSP's this iteration and the next, by parity, each worker once.
TEST(WorkerShares, KeepsThisIterationAndTheNextEachWorkerOnce) {
  const auto g = gradientWithRows({2});
  const auto share = [&](std::uint32_t source, std::uint64_t t) { return packRows(3, source, t, g.data(), kRows, kWidth); };
  WorkerShares shares(2, 3, "rows");
  shares.keep(share(1, 6), 5);  // a fast peer's share of the next iteration
  shares.keep(share(0, 5), 5);
  EXPECT_FALSE(shares.complete(5));
  EXPECT_FALSE(shares.complete(6));
  shares.keep(share(1, 5), 5);
  EXPECT_TRUE(shares.complete(5));
  const std::vector<Message> taken = shares.take(5);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].header().source, 0u);
  EXPECT_EQ(taken[1].header().source, 1u);
  EXPECT_FALSE(shares.complete(5));  // emptied for iteration 7
  EXPECT_THROW(shares.keep(share(1, 6), 6), CommError);  // twice for iteration 6
  EXPECT_THROW(shares.keep(share(2, 6), 6), CommError);  // no worker
  EXPECT_THROW(shares.keep(share(0, 8), 6), CommError);  // beyond the next iteration
  shares.keep(share(0, 6), 6);
  EXPECT_TRUE(shares.complete(6));
}

}  // namespace
}  // namespace poseidon
