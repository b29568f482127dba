// The schedule rule against hand-computed timelines: an FC layer whose PS sync hides behind
// a long backward below it is better left on PS, though SFB moves 32x fewer bytes and the
// per-layer time rule picks it.
#include "simulate/schedule_rule.h"

#include <gtest/gtest.h>

#include "poseidon/errors.h"
#include "sim_fixtures.h"
#include "simulate/calibration.h"
#include "simulate/paper_models.h"
#include "simulate/simulator.h"

namespace poseidon::sim {
namespace {

// A 4096 x 4096 FC layer above a one-float conv whose backward takes `conv_backward_s`; two
// nodes whose link carries the FC's factors (32 x 8192 floats, 1 MiB) in 1 s and reconstruct
// them in 1 s on the device. Under PS each node's uplink carries 64 MiB: its pushes of the
// half on the peer's shard and its own shard's fresh values for the peer, 64 s.
SimModel fcAboveConv(double conv_backward_s) {
  return model({layer("conv", 1, 1.0, conv_backward_s), fcLayer("fc", 4096, 4096, 1.0, 2.0)});
}

SimConfig twoNodes() {
  SimConfig c = config(System::kPoseidon, 2);
  c.bandwidth_bytes_per_s = 32.0 * (4096 + 4096) * 4;
  c.gemm_flops_per_s = 2.0 * 4096 * 4096 * 32;
  return c;
}

TEST(ScheduleRule, KeepsPsWhereItsSyncHidesBehindTheBackward) {
  const SimModel m = fcAboveConv(80.0);
  SimConfig c = twoNodes();
  const ScheduleChoice choice = chooseBySchedule(m, c);
  // The time rule: SFB, 1 s of factors + 1 s of reconstruction against 32 s of PS (the time
  // rule's half of Table 1's count each way). On the device the reconstruction runs 4-5 and
  // delays the conv's backward: 2 + 2 + 1 + 80 = 85.
  EXPECT_EQ(choice.time_rule_schemes, (std::vector<Scheme>{Scheme::kPS, Scheme::kSFB}));
  EXPECT_NEAR(choice.time_rule_s, 85.0, 1e-3);
  // PS: the FC's pairs travel from 4 for some 65 s, behind the conv's 80 s backward (4-84),
  // and are back before the next forward reaches the FC: 2 + 2 + 80 = 84.
  EXPECT_EQ(choice.schemes, (std::vector<Scheme>{Scheme::kPS, Scheme::kPS}));
  EXPECT_NEAR(choice.iteration_s, 84.0, 1e-3);
  EXPECT_TRUE(choice.exhaustive);
  EXPECT_EQ(choice.simulated, 2);  // the time rule's plan and the one other combination
  // The simulator's own --cost-model schedule runs that plan.
  c.rule = CostRule::kSchedule;
  const SimResult r = simulate(m, c);
  EXPECT_EQ(r.layers[1].scheme, Scheme::kPS);
  EXPECT_NEAR(r.iteration_s, 84.0, 1e-3);
}

TEST(ScheduleRule, TakesSfbWhereThePsSyncWouldBeExposed) {
  // With a 4 s backward below, PS's 64 s on the wire cannot hide; SFB's factors can.
  const ScheduleChoice choice = chooseBySchedule(fcAboveConv(4.0), twoNodes());
  EXPECT_EQ(choice.schemes, choice.time_rule_schemes);
  EXPECT_EQ(choice.schemes[1], Scheme::kSFB);
  EXPECT_NEAR(choice.iteration_s, 9.0, 1e-3);  // 2 + 2 + 1 (reconstruction) + 4
  EXPECT_DOUBLE_EQ(choice.iteration_s, choice.time_rule_s);
}

TEST(ScheduleRule, NeverSlowerThanTheByteOrTimeRule) {
  for (const std::string name : {"alexnet", "vgg19-22k"}) {
    for (int nodes : {4, 16}) {
      SimConfig c;
      c.nodes = nodes;
      c.batch = paperModel(name).default_batch;
      c.device_flops_per_s = calibratedDeviceRate();
      c.bandwidth_bytes_per_s = 1.25e9;  // 10 GbE
      const SimModel m = paperModel(name);
      const ScheduleChoice choice = chooseBySchedule(m, c);
      c.rule = CostRule::kBytes;
      const double bytes = simulate(m, c).iteration_s;
      c.rule = CostRule::kTime;
      const double time = simulate(m, c).iteration_s;
      EXPECT_LE(choice.iteration_s, bytes * (1 + 1e-12)) << name << " " << nodes;
      EXPECT_LE(choice.iteration_s, time * (1 + 1e-12)) << name << " " << nodes;
      EXPECT_DOUBLE_EQ(choice.time_rule_s, time) << name << " " << nodes;
      EXPECT_TRUE(choice.exhaustive);
      EXPECT_EQ(choice.simulated, 8);  // three FC layers: 2^3 plans
    }
  }
}

TEST(ScheduleRule, DescendsWhereThereAreTooManyFcLayersToTryAll) {
  // Nine 512 x 512 FC layers above a conv whose backward takes 20 s. Each FC's PS sync (0.5 s
  // of pushes and pulls on each uplink) hides behind that backward; by SFB its factors take
  // 0.0625 s and its reconstruction 0.1 s of the device. The time rule takes SFB for all
  // nine (0.1625 s against 0.5 s); the descent flips them to PS one by one, 0.1 s each.
  std::vector<SimLayer> layers{layer("conv", 1, 1.0, 20.0)};
  for (int l = 0; l <= kExhaustiveLayers; ++l) layers.push_back(fcLayer("fc" + std::to_string(l), 512, 512, 0.1, 0.2));
  const SimModel m = model(layers);
  SimConfig c = config(System::kPoseidon, 2);
  c.gemm_flops_per_s = 2.0 * 512 * 512 * 32 / 0.1;
  const ScheduleChoice choice = chooseBySchedule(m, c);
  EXPECT_FALSE(choice.exhaustive);
  for (int l = 1; l <= kExhaustiveLayers + 1; ++l) {
    EXPECT_EQ(choice.time_rule_schemes[l], Scheme::kSFB) << l;
    EXPECT_EQ(choice.schemes[l], Scheme::kPS) << l;
  }
  EXPECT_NEAR(choice.time_rule_s - choice.iteration_s, (kExhaustiveLayers + 1) * 0.1, 1e-3);
  // One pass that flips every layer and one that finds nothing more: far fewer plans than
  // the 2^9 combinations.
  EXPECT_EQ(choice.simulated, 1 + 2 * (kExhaustiveLayers + 1));
}

TEST(ScheduleRule, OneNodeHasNothingToChoose) {
  const ScheduleChoice choice = chooseBySchedule(fcAboveConv(4.0), config(System::kPoseidon, 1));
  EXPECT_EQ(choice.schemes, (std::vector<Scheme>{Scheme::kPS, Scheme::kPS}));
  EXPECT_EQ(choice.simulated, 1);
}

TEST(ScheduleRule, AFixedPlanMustFitTheModel) {
  const SimModel m = fcAboveConv(4.0);
  SimConfig c = twoNodes();
  c.schemes = {Scheme::kPS};
  EXPECT_THROW(simulate(m, c), InputError);
  c.schemes = {Scheme::kSFB, Scheme::kPS};  // the conv cannot go by SFB
  EXPECT_THROW(simulate(m, c), InputError);
  c.schemes = {Scheme::kPS, Scheme::kAllreduce};
  EXPECT_THROW(simulate(m, c), InputError);
  c.schemes = {Scheme::kPS, Scheme::kSFB};
  EXPECT_EQ(simulate(m, c).layers[1].scheme, Scheme::kSFB);
}

}  // namespace
}  // namespace poseidon::sim
