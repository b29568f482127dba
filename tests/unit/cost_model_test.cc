// The cost model against the papers' worked values (docs/design.md).
#include "coordinator/cost_model.h"

#include <gtest/gtest.h>

namespace poseidon {
namespace {

TEST(CostModel, Paper2015AlexNetFc6Fc7) {
  // P = 4, K = 256, M = N = 4096.
  EXPECT_EQ(CostModel::sfbClusterFloats(4096, 4096, 4, 256), 18874368.0);
  EXPECT_EQ(CostModel::psClusterFloats(4096, 4096, 4), 134217728.0);
  EXPECT_EQ(CostModel::factorPushClusterFloats(4096, 4096, 4, 256), 75497472.0);
}

TEST(CostModel, Atc17Table1) {
  // 4096 x 4096 FC, P1 = P2 = 8, K = 32.
  EXPECT_EQ(CostModel::sfbFloats(4096, 4096, 8, 32), 3670016.0);
  EXPECT_EQ(CostModel::psFloats(4096, 4096, 8, 8, PsRole::kServerAndWorker), 58720256.0);
  EXPECT_EQ(CostModel::psFloats(4096, 4096, 8, 8, PsRole::kWorkerOnly), 33554432.0);
  EXPECT_EQ(CostModel::psFloats(4096, 4096, 8, 8, PsRole::kServerOnly), 33554432.0);
}

TEST(CostModel, BestSchemePicksSfbForLargeFcAndPsOtherwise) {
  LayerInfo fc{"fc", LayerKind::kFC, {}, 4096, 4096};
  EXPECT_EQ(CostModel::bestScheme(fc, 8, 8, 32, PsRole::kServerAndWorker), Scheme::kSFB);
  LayerInfo conv{"conv", LayerKind::kConv, {}, 0, 0};
  EXPECT_EQ(CostModel::bestScheme(conv, 8, 8, 32, PsRole::kServerAndWorker), Scheme::kPS);
  // A classifier with 10 outputs at a huge batch: the factors outweigh the matrix.
  LayerInfo small{"fc", LayerKind::kFC, {}, 10, 4096};
  EXPECT_EQ(CostModel::bestScheme(small, 8, 8, 4096, PsRole::kServerAndWorker), Scheme::kPS);
}

TEST(CostModel, SentFloatsAreHalfOfTheTableCount) {
  ClusterInfo colocated(4, 0, 0);
  EXPECT_EQ(CostModel::psSentFloats(1000, colocated, 0), 1000.0 * (4 + 4 - 2) / 4);
  ClusterInfo split(4, 1, 1);  // ranks 0-2 work, rank 3 serves
  EXPECT_EQ(CostModel::psSentFloats(1000, split, 0), 1000.0);
  EXPECT_EQ(CostModel::psSentFloats(1000, split, 3), 3 * 1000.0);
}

}  // namespace
}  // namespace poseidon
