// Sufficient factor broadcasting against the parameter server, over the loopback
// transport. Each worker's FC gradient is built from random factors, dW = U^T V and
// db = colsum(U), as autograd would produce it; SFB and PS must train to the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "comm/gradient16.h"
#include "common/digest.h"
#include "poseidon/errors.h"
#include "poseidon/session.h"
#include "update/reconstruct.h"
#include "test_ranks.h"

namespace poseidon {
namespace {

constexpr std::int64_t M = 24, N = 40, K = 5;
constexpr int kIterations = 5;

ModelInfo fcModel() {
  ModelInfo m;
  m.name = "fc";
  m.layers.push_back(LayerInfo{"fc0", LayerKind::kFC, {{"weight", {M, N}}, {"bias", {M}}}, M, N});
  return m;
}

// Factors of worker w at iteration t, the same whichever scheme runs.
void factors(int w, int t, std::vector<float>& U, std::vector<float>& V) {
  std::mt19937 rng(1000 * w + t);
  std::normal_distribution<float> d(0.0f, 1.0f);
  U.resize(K * M);
  V.resize(K * N);
  for (auto& x : U) x = d(rng);
  for (auto& x : V) x = d(rng);
}

// Trains over `ranks` loopback ranks with `scheme` on `wire`, each worker's factors first
// rounded through `rounded` (fp32: as they are); returns rank 0's weight and bias.
std::vector<float> train(int ranks, const std::string& scheme, bool wfbp, const std::string& wire = "fp32",
                         WireFormat rounded = WireFormat::kFp32) {
  std::vector<std::vector<float>> result(ranks);
  testing::runRanks(ranks, [&](Transport& transport, int rank) {
    std::vector<float> W(M * N), b(M), gW(M * N), gb(M);
    for (std::int64_t i = 0; i < M * N; ++i) W[i] = std::sin(0.1f * i);
    for (std::int64_t i = 0; i < M; ++i) b[i] = 0.01f * i;
    Options o;
    o.scheme = scheme;
    o.batch = K;
    o.wfbp = wfbp;
    o.lr = 0.01f;
    o.momentum = 0.9f;
    o.weight_decay = 0.001f;
    o.timeout = std::chrono::milliseconds(20000);
    o.wire = wire;
    Session session(transport, fcModel(), {{W.data(), b.data()}}, o);
    EXPECT_EQ(usesFactors(session.plan()[0].scheme), scheme == "sfb");
    std::vector<float> U, V;
    for (int t = 0; t < kIterations; ++t) {
      session.waitLayer(0);
      factors(rank, t, U, V);
      roundThrough(rounded, U.data(), U.data(), U.size());
      roundThrough(rounded, V.data(), V.data(), V.size());
      if (usesFactors(session.plan()[0].scheme)) {
        session.factorsReady(0, U.data(), V.data(), K);
        session.layerReleased(0);
      } else {
        std::fill(gW.begin(), gW.end(), 0.0f);
        std::fill(gb.begin(), gb.end(), 0.0f);
        for (std::int64_t k = 0; k < K; ++k) {
          for (std::int64_t m = 0; m < M; ++m) {
            gb[m] += U[k * M + m];
            for (std::int64_t n = 0; n < N; ++n) gW[m * N + n] += U[k * M + m] * V[k * N + n];
          }
        }
        session.gradientsReady(0, {gW.data(), gb.data()});
      }
      session.endIteration();
    }
    session.finish();
    result[rank] = W;
    result[rank].insert(result[rank].end(), b.begin(), b.end());
  });
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(result[r], result[0]) << "rank " << r << " differs from rank 0";
  return result[0];
}

double relativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += a[i] * a[i];
  return std::sqrt(d / n);
}

TEST(SfbLoopback, ThreeWorkersSfbEqualsPs) {
  const auto ps = train(3, "ps", true);
  const auto sfb = train(3, "sfb", true);
  EXPECT_LE(relativeDifference(ps, sfb), 1e-5);
}

// Factors in 16 bits: every worker reconstructs from the same rounded factors, its own
// included, bit for bit as fp32 SFB trained on factors rounded beforehand (U and V each
// with its own fp16 scale).
TEST(SfbLoopback, SixteenBitFactorsEqualFp32OnRoundedFactors) {
  for (const WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    const auto wire16 = train(3, "sfb", true, wireFormatName(f));
    const auto reference = train(3, "sfb", true, "fp32", f);
    EXPECT_EQ(wire16, reference) << wireFormatName(f);
    EXPECT_NE(wire16, train(3, "sfb", true)) << "rounding happened";
  }
}

TEST(SfbLoopback, WithoutWfbpToo) {
  const auto ps = train(2, "ps", false);
  const auto sfb = train(2, "sfb", false);
  EXPECT_LE(relativeDifference(ps, sfb), 1e-5);
}

TEST(SfbReconstruct, MatchesTheDenseSumOfOuterProducts) {
  std::vector<float> U, V, W(M * N, 0.0f), b(M, 0.0f);
  factors(7, 0, U, V);
  SfbLayerState s;
  s.M = M;
  s.N = N;
  s.weight = W.data();
  s.bias = b.data();
  reconstructAndApply(s, U.data(), V.data(), K, 1.0f, SgdOptions{1.0f, 0.0f, 0.0f});
  for (std::int64_t m = 0; m < M; ++m) {
    double db = 0;
    for (std::int64_t k = 0; k < K; ++k) db += U[k * M + m];
    EXPECT_NEAR(b[m], -db, 1e-4);
    for (std::int64_t n = 0; n < N; ++n) {
      double g = 0;
      for (std::int64_t k = 0; k < K; ++k) g += static_cast<double>(U[k * M + m]) * V[k * N + n];
      ASSERT_NEAR(W[m * N + n], -g, 1e-4);
    }
  }
}

}  // namespace
}  // namespace poseidon
