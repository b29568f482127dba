#include <gtest/gtest.h>

#include <cmath>

#include "poseidon/errors.h"
#include "ps/kv_shard.h"
#include "update/sgd.h"

namespace poseidon {
namespace {

// PyTorch's SGD, written out naively in double: d = g + wd p; buf = d | m buf + d; p -= lr buf.
struct ReferenceSgd {
  std::vector<double> p, buf;
  bool first = true;
  void step(const std::vector<double>& g, double lr, double m, double wd) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] + wd * p[i];
      buf[i] = first ? d : m * buf[i] + d;
      p[i] -= lr * (m != 0 ? buf[i] : d);
    }
    first = false;
  }
};

TEST(Sgd, MatchesPyTorchSemanticsOverSteps) {
  const std::int64_t n = 3000;  // spans several internal blocks
  std::vector<float> p(n), buf(n);
  ReferenceSgd ref;
  for (std::int64_t i = 0; i < n; ++i) ref.p.push_back(p[i] = std::sin(0.01f * i));
  SgdOptions o{0.1f, 0.9f, 0.01f};
  for (int step = 0; step < 5; ++step) {
    std::vector<float> g1(n), g2(n);
    std::vector<double> mean(n);
    for (std::int64_t i = 0; i < n; ++i) {
      g1[i] = std::cos(0.02f * i + step);
      g2[i] = 0.5f - 0.001f * i;
      mean[i] = (static_cast<double>(g1[i]) + g2[i]) / 2;
    }
    sgdStep(p.data(), buf.data(), {g1.data(), g2.data()}, 0.5f, n, o, step == 0);
    ref.step(mean, 0.1, 0.9, 0.01);
  }
  for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref.p[i], 1e-5) << i;
}

TEST(Sgd, WithoutMomentumNeedsNoBuffer) {
  std::vector<float> p = {1.0f, 2.0f}, g = {0.5f, -1.0f};
  sgdStep(p.data(), nullptr, {g.data()}, 1.0f, 2, SgdOptions{0.1f, 0.0f, 0.0f}, true);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], 2.1f);
}

// A shard sums 16-bit pushes in place (GradientView::half): the step equals, bit for bit,
// the step over the pushes widened to fp32 first, fp32 and 16-bit contributions mixed,
// over a length that ends inside a block.
TEST(Sgd, SixteenBitViewsStepAsTheirWidenedCopies) {
  const std::int64_t n = 2500;
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    std::vector<float> g0(n), g1(n), g2(n);
    for (std::int64_t i = 0; i < n; ++i) {
      g0[i] = std::cos(0.1f * i) * 1e-2f;
      g1[i] = std::sin(0.3f * i) * 3e-2f;
      g2[i] = std::sin(0.7f * i + 1) * 2e-3f;
    }
    const float scale1 = f == WireFormat::kFp16 ? fp16Scale(g1.data(), n) : 1.0f;
    const float scale2 = f == WireFormat::kFp16 ? fp16Scale(g2.data(), n) : 1.0f;
    std::vector<std::uint16_t> h1(n), h2(n);
    std::vector<float> w1(n), w2(n);
    if (f == WireFormat::kBf16) {
      toBf16(g1.data(), h1.data(), n);
      toBf16(g2.data(), h2.data(), n);
    } else {
      toFp16(g1.data(), h1.data(), n, scale1);
      toFp16(g2.data(), h2.data(), n, scale2);
    }
    widen(HalfSpan{f, scale1, h1.data()}, 0, w1.data(), n);
    widen(HalfSpan{f, scale2, h2.data()}, 0, w2.data(), n);
    const GradientView fp32{g0.data(), {}};
    const GradientView half1{nullptr, HalfSpan{f, scale1, h1.data()}};
    const GradientView half2{nullptr, HalfSpan{f, scale2, h2.data()}};
    const SgdOptions o{0.1f, 0.9f, 0.01f};
    // fp32 first, then 16-bit first (the block is widened straight into the sum).
    for (bool half_first : {false, true}) {
      std::vector<float> p(n, 0.5f), buf(n), p_ref(n, 0.5f), buf_ref(n);
      for (int step = 0; step < 3; ++step) {
        if (half_first) {
          sgdStepViews(p.data(), buf.data(), {half1, fp32, half2}, 1.0f / 3, n, o, step == 0);
          sgdStep(p_ref.data(), buf_ref.data(), {w1.data(), g0.data(), w2.data()}, 1.0f / 3, n, o, step == 0);
        } else {
          sgdStepViews(p.data(), buf.data(), {fp32, half1, half2}, 1.0f / 3, n, o, step == 0);
          sgdStep(p_ref.data(), buf_ref.data(), {g0.data(), w1.data(), w2.data()}, 1.0f / 3, n, o, step == 0);
        }
      }
      EXPECT_EQ(p, p_ref) << wireFormatName(f) << (half_first ? ", 16 bits first" : "");
      EXPECT_EQ(buf, buf_ref) << wireFormatName(f) << (half_first ? ", 16 bits first" : "");
    }
  }
}

class ShardTest : public ::testing::Test {
 protected:
  ShardTest() {
    model.name = "m";
    model.layers.push_back(LayerInfo{"fc0", LayerKind::kFC, {{"weight", {4, 2}}}, 4, 2});
    values.assign(8, 1.0f);
  }
  ModelInfo model;
  std::vector<float> values;
};

TEST_F(ShardTest, AppliesTheStepOnlyWhenEveryWorkerHasPushed) {
  InformationBook book(model, ClusterInfo(3, 0, 1), 1 << 20);  // 3 workers, one shard
  KVShard shard(book, 0, SgdOptions{1.0f, 0.0f, 0.0f}, [&](const KVPair& kv) { return values.data() + kv.offset; });
  std::vector<float> g0(8, 3.0f), g1(8, 6.0f), g2(8, 0.0f);
  EXPECT_FALSE(shard.push(0, 0, 0, Contribution{g0.data(), {}}));
  EXPECT_FALSE(shard.push(0, 0, 2, Contribution{g2.data(), {}}));
  EXPECT_EQ(values[0], 1.0f);  // untouched until the last worker arrives
  EXPECT_TRUE(shard.push(0, 0, 1, Contribution{g1.data(), {}}));
  EXPECT_FLOAT_EQ(values[0], 1.0f - 3.0f);  // mean gradient (3 + 6 + 0) / 3
  EXPECT_EQ(shard.version(0), 1u);
}

TEST_F(ShardTest, RejectsWrongIterationDuplicateAndForeignPair) {
  InformationBook book(model, ClusterInfo(2, 0, 1), 1 << 20);
  KVShard shard(book, 0, SgdOptions{}, [&](const KVPair& kv) { return values.data() + kv.offset; });
  std::vector<float> g(8, 1.0f);
  EXPECT_THROW(shard.push(0, 1, 0, Contribution{g.data(), {}}), CommError);  // iteration ahead
  EXPECT_FALSE(shard.push(0, 0, 0, Contribution{g.data(), {}}));
  EXPECT_THROW(shard.push(0, 0, 0, Contribution{g.data(), {}}), CommError);  // twice
  EXPECT_THROW(shard.push(0, 0, 5, Contribution{g.data(), {}}), CommError);  // not a worker
  EXPECT_THROW(shard.push(7, 0, 1, Contribution{g.data(), {}}), CommError);  // no such pair here
}

TEST_F(ShardTest, StalenessAcceptsUpdatesUpToSAheadAndStepsThemInOrder) {
  InformationBook book(model, ClusterInfo(2, 0, 1), 1 << 20);  // 2 workers, one shard
  KVShard shard(
      book, 0, SgdOptions{1.0f, 0.0f, 0.0f}, [&](const KVPair& kv) { return values.data() + kv.offset; },
      /*start=*/0, /*staleness=*/2);
  std::vector<float> g(8, 1.0f), h(8, 3.0f);
  // Worker 0 runs ahead: iterations 0, 1, 2 (= version + 2); 3 would break the bound.
  EXPECT_FALSE(shard.record(0, 0, 0, Contribution{g.data(), {}}));
  EXPECT_FALSE(shard.record(0, 1, 0, Contribution{g.data(), {}}));
  EXPECT_FALSE(shard.record(0, 2, 0, Contribution{g.data(), {}}));
  EXPECT_THROW(shard.record(0, 3, 0, Contribution{g.data(), {}}), CommError);
  EXPECT_EQ(shard.version(0), 0u);
  // Worker 1 catches up one iteration at a time; each completes one step.
  EXPECT_TRUE(shard.record(0, 0, 1, Contribution{h.data(), {}}));
  shard.step(0);
  EXPECT_FLOAT_EQ(values[0], 1.0f - 2.0f);  // mean of 1 and 3
  EXPECT_FALSE(shard.ready(0));
  EXPECT_TRUE(shard.record(0, 1, 1, Contribution{h.data(), {}}));
  shard.step(0);
  EXPECT_FLOAT_EQ(values[0], -1.0f - 2.0f);
  EXPECT_EQ(shard.version(0), 2u);
  // Now iteration 4 (= 2 + 2) is within the window; 1 is in the past.
  EXPECT_FALSE(shard.record(0, 3, 0, Contribution{g.data(), {}}));
  EXPECT_THROW(shard.record(0, 1, 1, Contribution{h.data(), {}}), CommError);
}

TEST_F(ShardTest, DroppingGoesAheadWithThePresentUpdatesAndDiscardsLateOnes) {
  InformationBook book(model, ClusterInfo(3, 0, 1), 1 << 20);
  KVShard shard(book, 0, SgdOptions{1.0f, 0.0f, 0.0f}, [&](const KVPair& kv) { return values.data() + kv.offset; });
  shard.allowDrops();
  std::vector<float> g(8, 2.0f), h(8, 4.0f);
  shard.record(0, 0, 0, Contribution{g.data(), {}});
  shard.record(0, 0, 2, Contribution{h.data(), {}});
  ASSERT_TRUE(shard.oldestWaiting().has_value());
  EXPECT_EQ(shard.overdue(*shard.oldestWaiting()), (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(shard.step(0), 1);              // worker 1 left out
  EXPECT_FLOAT_EQ(values[0], 1.0f - 3.0f);  // mean over the two present
  EXPECT_EQ(shard.dropped(), 1u);
  EXPECT_FALSE(shard.record(0, 0, 1, Contribution{g.data(), {}}));  // too late: discarded
  EXPECT_EQ(shard.late(), 1u);
  EXPECT_FALSE(shard.oldestWaiting().has_value());
}

}  // namespace
}  // namespace poseidon
