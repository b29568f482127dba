#include "coordinator/information_book.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "models/model_spec.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

ModelInfo fcnet() { return modelInfoFromSpec(builtinModel("fcnet")); }

// Every float of every tensor is in exactly one pair, and pairs respect the size limit.
void expectExactCover(const InformationBook& book, std::int64_t max_bytes) {
  const auto& model = book.model();
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    for (std::size_t t = 0; t < model.layers[l].tensors.size(); ++t) {
      std::int64_t next = 0;
      for (auto key : book.pairsOfLayer(static_cast<int>(l))) {
        const auto& kv = book.pair(key);
        if (kv.tensor != static_cast<int>(t)) continue;
        EXPECT_EQ(kv.offset, next) << model.layers[l].name;
        EXPECT_LE(kv.length * 4, max_bytes);
        next += kv.length;
      }
      EXPECT_EQ(next, model.layers[l].tensors[t].numel()) << model.layers[l].name;
    }
  }
}

TEST(InformationBook, FcnetHasAboutFortyTwoMillionParameters) { EXPECT_NEAR(fcnet().numel() / 1e6, 42.6, 0.1); }

class FcnetShards : public ::testing::TestWithParam<int> {};

TEST_P(FcnetShards, LargestShardWithinTenPercentOfMean) {
  const int shards = GetParam();
  InformationBook book(fcnet(), ClusterInfo(shards, 0, 0), kDefaultPairBytes);
  expectExactCover(book, kDefaultPairBytes);
  std::int64_t total = 0, largest = 0;
  for (int s = 0; s < shards; ++s) {
    total += book.shardBytes(s);
    largest = std::max(largest, book.shardBytes(s));
  }
  EXPECT_EQ(total, fcnet().numel() * 4);
  const double mean = static_cast<double>(total) / shards;
  EXPECT_LE(largest, 1.10 * mean) << "largest shard " << largest << " bytes, mean " << mean;
}

INSTANTIATE_TEST_SUITE_P(Shards, FcnetShards, ::testing::Values(1, 2, 3, 4, 8, 16));

TEST(InformationBook, SameInputsGiveTheSameBookAndDigest) {
  InformationBook a(fcnet(), ClusterInfo(4, 0, 0), 1 << 20);
  InformationBook b(fcnet(), ClusterInfo(4, 0, 0), 1 << 20);
  EXPECT_EQ(a.digest(), b.digest());
  InformationBook c(fcnet(), ClusterInfo(4, 0, 0), 2 << 20);
  EXPECT_NE(a.digest(), c.digest());
  expectExactCover(a, 1 << 20);
}

TEST(InformationBook, PairsOfALayerAreContiguousKeys) {
  InformationBook book(fcnet(), ClusterInfo(4, 0, 0), kDefaultPairBytes);
  for (std::size_t l = 0; l < book.model().layers.size(); ++l) {
    const auto& keys = book.pairsOfLayer(static_cast<int>(l));
    ASSERT_FALSE(keys.empty());
    for (std::size_t i = 1; i < keys.size(); ++i) EXPECT_EQ(keys[i], keys[i - 1] + 1);
  }
}

TEST(InformationBook, SmallTensorsStayWhole) {
  // A bias of 10 floats is never cut, whatever the shard count.
  InformationBook book(fcnet(), ClusterInfo(16, 0, 0), kDefaultPairBytes);
  int bias_pairs = 0;
  for (const auto& kv : book.pairs()) {
    if (kv.layer == static_cast<int>(book.model().layers.size()) - 1 && kv.tensor == 1) ++bias_pairs;
  }
  EXPECT_EQ(bias_pairs, 1);
}

TEST(ClusterInfo, RejectsImpossibleLayouts) {
  EXPECT_THROW(ClusterInfo(4, 0, 5), InputError);  // more shards than ranks
  EXPECT_THROW(ClusterInfo(4, 4, 0), InputError);  // no worker left
  EXPECT_THROW(ClusterInfo(4, 2, 1), InputError);  // a server-only rank without a shard
  ClusterInfo c(4, 1, 2);
  EXPECT_EQ(c.workers(), 3);
  EXPECT_TRUE(c.hasShard(3));
  EXPECT_TRUE(c.hasShard(2));
  EXPECT_FALSE(c.hasShard(1));
  EXPECT_EQ(c.shardRank(0), 2);
}

}  // namespace
}  // namespace poseidon
