#include "coordinator/scheme_planner.h"

#include <gtest/gtest.h>

#include "coordinator/units.h"
#include "models/model_spec.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

std::vector<LayerPlan> fcnetPlan(CostRule rule, PlatformRates rates, int workers = 4) {
  return planSchemes(modelInfoFromSpec(builtinModel("fcnet")), ClusterInfo(workers, 0, 0),
                     PlanRequest{SchemeMode::kAuto, rule, 32, rates});
}

TEST(SchemePlanner, BytesRulePutsTheBigFcLayersOnSfb) {
  const auto plan = fcnetPlan(CostRule::kBytes, {});
  ASSERT_EQ(plan.size(), 6u);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(plan[l].scheme, Scheme::kPS) << "conv " << l;
  EXPECT_EQ(plan[3].scheme, Scheme::kSFB);  // 4096 x 6272
  EXPECT_EQ(plan[4].scheme, Scheme::kSFB);  // 4096 x 4096
  EXPECT_EQ(plan[5].scheme, Scheme::kPS);   // 10 x 4096: the factors outweigh the matrix
  // The worked figure: 2 K (P1 - 1)(M + N) for 4096 x 4096 at K = 32, P1 = 4.
  EXPECT_EQ(plan[4].sfb_floats, 2.0 * 32 * 3 * (4096 + 4096));
}

TEST(SchemePlanner, TimeRuleChargesTheReconstructionGemm) {
  // A fast link (shared memory): moving the matrix is cheaper than P1 x the GEMM.
  const auto fast = fcnetPlan(CostRule::kTime, PlatformRates{2e9, 50e9});
  EXPECT_EQ(fast[3].scheme, Scheme::kPS);
  EXPECT_EQ(fast[3].bytes_choice, Scheme::kSFB);  // the two rules disagree here
  // A 1 gbit link: the bytes dominate again.
  const auto slow = fcnetPlan(CostRule::kTime, PlatformRates{parseBandwidth("1gbit", "bandwidth"), 50e9});
  EXPECT_EQ(slow[3].scheme, Scheme::kSFB);
  EXPECT_EQ(slow[4].scheme, Scheme::kSFB);
  EXPECT_GT(slow[3].ps_seconds, slow[3].sfb_seconds);
}

TEST(SchemePlanner, ForcedModesAndOneWorker) {
  const auto model = modelInfoFromSpec(builtinModel("fcnet"));
  auto sfb = planSchemes(model, ClusterInfo(4, 0, 0), PlanRequest{SchemeMode::kSFB, CostRule::kBytes, 32, {}});
  EXPECT_EQ(sfb[5].scheme, Scheme::kSFB);  // forced, even where it costs more
  EXPECT_EQ(sfb[0].scheme, Scheme::kPS);   // conv layers cannot
  auto one = planSchemes(model, ClusterInfo(1, 0, 0), PlanRequest{SchemeMode::kSFB, CostRule::kBytes, 32, {}});
  for (const auto& p : one) EXPECT_EQ(p.scheme, Scheme::kPS);
  EXPECT_THROW(planSchemes(model, ClusterInfo(4, 0, 0), PlanRequest{SchemeMode::kAuto, CostRule::kTime, 32, {}}),
               InputError);
}

TEST(SchemePlanner, A16BitWireCountsPsAtHalfItsBytes) {
  // 200 x 200 on 4 workers, K = 32: SFB 2 K (P1 - 1)(M + N) = 76800 floats; PS 2 M N (P1 + P2
  // - 2) / P2 = 120000 in fp32, 60000 in bf16, so PS on a 16-bit wire with SFB in fp32 (as
  // with error feedback, which keeps factors fp32) turns the layer to PS.
  ModelInfo model;
  model.name = "one-fc";
  LayerInfo fc;
  fc.name = "fc";
  fc.kind = LayerKind::kFC;
  fc.M = 200;
  fc.N = 200;
  fc.tensors = {TensorInfo{"weight", {200, 200}}};
  model.layers = {fc};
  PlanRequest req{SchemeMode::kAuto, CostRule::kBytes, 32, {}};
  const auto fp32 = planSchemes(model, ClusterInfo(4, 0, 0), req);
  EXPECT_EQ(fp32[0].scheme, Scheme::kSFB);
  EXPECT_EQ(fp32[0].ps_floats, 120000.0);
  req.ps_wire_share = CostModel::psWireShare(WireFormat::kBf16, WireFormat::kBf16);
  const auto bf16 = planSchemes(model, ClusterInfo(4, 0, 0), req);
  EXPECT_EQ(bf16[0].scheme, Scheme::kPS);
  EXPECT_EQ(bf16[0].ps_floats, 60000.0);
  EXPECT_EQ(bf16[0].sfb_floats, 76800.0);
  EXPECT_NE(bf16[0].reason.find("16-bit wire"), std::string::npos) << bf16[0].reason;
  // Updates back in fp32 (SSP, straggler dropping, gradient mode): three quarters.
  EXPECT_EQ(CostModel::psWireShare(WireFormat::kFp16, WireFormat::kFp32), 0.75);
}

TEST(SchemePlanner, TiesGoToAllreduceWhenAsked) {
  // fcnet on 4 workers, a shard on each: the conv layers and the small FC layer cost as
  // many bytes on PS as on allreduce. The big FC layers stay SFB, far cheaper than both.
  PlanRequest req{SchemeMode::kAuto, CostRule::kBytes, 32, {}};
  req.allreduce_on_ties = true;
  const auto model = modelInfoFromSpec(builtinModel("fcnet"));
  const auto bytes = planSchemes(model, ClusterInfo(4, 0, 0), req);
  for (int l : {0, 1, 2, 5}) EXPECT_EQ(bytes[l].scheme, Scheme::kAllreduce) << "layer " << l;
  EXPECT_EQ(bytes[3].scheme, Scheme::kSFB);
  EXPECT_EQ(bytes[4].scheme, Scheme::kSFB);
  req.rule = CostRule::kTime;
  req.rates = PlatformRates{parseBandwidth("10gbit", "bandwidth"), 50e9};
  const auto timed = planSchemes(model, ClusterInfo(4, 0, 0), req);
  for (int l : {0, 1, 2}) EXPECT_EQ(timed[l].scheme, Scheme::kAllreduce) << "layer " << l;
  // Not ties: PS with 2 shards for 4 workers costs a shard's node more (allreduce with or
  // without the flag), and a 16-bit wire makes PS cheaper (PS with it).
  req.rule = CostRule::kBytes;
  req.rates = {};
  const PlanRequest plain{SchemeMode::kAuto, CostRule::kBytes, 32, {}};
  EXPECT_EQ(planSchemes(model, ClusterInfo(4, 0, 2), req)[0].scheme, Scheme::kAllreduce);
  EXPECT_EQ(planSchemes(model, ClusterInfo(4, 0, 2), plain)[0].scheme, Scheme::kAllreduce);
  req.ps_wire_share = CostModel::psWireShare(WireFormat::kBf16, WireFormat::kBf16);
  EXPECT_EQ(planSchemes(model, ClusterInfo(4, 0, 0), req)[0].scheme, Scheme::kPS);
  // Without the flag (SSP, straggler dropping, the simulator) a tie keeps PS.
  EXPECT_EQ(fcnetPlan(CostRule::kBytes, {})[0].scheme, Scheme::kPS);
}

TEST(Units, Bandwidths) {
  EXPECT_DOUBLE_EQ(parseBandwidth("1gbit", "x"), 125e6);
  EXPECT_DOUBLE_EQ(parseBandwidth("100mbit", "x"), 12.5e6);
  EXPECT_DOUBLE_EQ(parseBandwidth("125MB", "x"), 125e6);
  EXPECT_DOUBLE_EQ(parseBandwidth("5000", "x"), 5000);
  EXPECT_THROW(parseBandwidth("fast", "bandwidth"), InputError);
  EXPECT_THROW(parseBandwidth("1parsec", "bandwidth"), InputError);
  EXPECT_THROW(parseBandwidth("0", "bandwidth"), InputError);
  // Rates an option may leave off: 0 is none; errors name the option, for each front end.
  EXPECT_EQ(parseRateOrOff("0", "stack_rate"), 0);
  EXPECT_EQ(parseRateOrOff("0.0", "stack_rate"), 0);
  EXPECT_DOUBLE_EQ(parseRateOrOff("500MB", "stack_rate"), 500e6);
  try {
    parseRateOrOff("fast", "stack_rate");
    ADD_FAILURE() << "no error";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "stack_rate");
    EXPECT_NE(std::string(e.what()).find("stack_rate=fast"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("or 0 for none"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseRateOrOff("-5MB", "stack_rate"), OptionError);
  EXPECT_THROW(parseSchemeMode("carrier-pigeon"), InputError);
}

}  // namespace
}  // namespace poseidon
