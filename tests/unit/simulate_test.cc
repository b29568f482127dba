// The simulator against hand-computed timelines (the fixtures' link carries one 2 MiB KV
// pair per second).
#include "simulate/simulator.h"

#include <gtest/gtest.h>

#include <chrono>

#include "poseidon/errors.h"
#include "poseidon/options.h"
#include "sim_fixtures.h"
#include "simulate/calibration.h"
#include "simulate/paper_models.h"
#include "simulate/sync_plan.h"

namespace poseidon::sim {
namespace {

TEST(Simulate, OneNodeIsComputeOnly) {
  const SimModel m = model({layer("a", 4 * kPairFloats, 1.0, 2.0), layer("b", kPairFloats, 0.5, 1.0)});
  for (System s : allSystems()) {
    const SimResult r = simulate(m, config(s, 1));
    EXPECT_DOUBLE_EQ(r.iteration_s, 4.5) << systemName(s);
    EXPECT_DOUBLE_EQ(r.images_per_s, kBatch / 4.5);
    EXPECT_EQ(r.messages, 0);
  }
}

TEST(Simulate, TwoNodesPsIsComputePlusBytesOverRatePlusLatency) {
  // 4 MiB: two pairs, one per shard. Each node pushes its remote pair (1 s + latency), the
  // server steps, the fresh pair comes back (1 s + latency): S / B + 2 latency.
  const SimModel m = model({layer("a", 2 * kPairFloats, 1.0, 2.0)});
  SimConfig c = config(System::kWfbp, 2);
  c.latency_s = 0.25;
  const SimResult r = simulate(m, c);
  EXPECT_DOUBLE_EQ(r.iteration_s, 3.0 + 2.0 + 2 * 0.25);
  EXPECT_DOUBLE_EQ(r.images_per_s, 2 * kBatch / 5.5);
  // Each uplink carries one pair each way per iteration: 2 s of 5.5.
  EXPECT_DOUBLE_EQ(r.uplink_utilisation[0], 2.0 / 5.5);
  EXPECT_DOUBLE_EQ(r.layers[0].bytes_sent_per_node, 2 * kPairBytes);
}

TEST(Simulate, A16BitWireHalvesThePsBytesAndTheirTime) {
  // The schedule above with pushes and fresh values in 16 bits: 0.5 s each way.
  const SimModel m = model({layer("a", 2 * kPairFloats, 1.0, 2.0)});
  SimConfig c = config(System::kWfbp, 2);
  c.latency_s = 0.25;
  c.wire = WireFormat::kBf16;
  const SimResult r = simulate(m, c);
  EXPECT_DOUBLE_EQ(r.iteration_s, 3.0 + 1.0 + 2 * 0.25);
  EXPECT_DOUBLE_EQ(r.layers[0].bytes_sent_per_node, kPairBytes);
}

TEST(Simulate, HostCpuBoundsTheIterationWhereNodesShareCores) {
  // The schedule of the test above: 5.5 s, each node sending two pairs (4 MiB) per iteration.
  SimModel m = model({layer("a", 2 * kPairFloats, 1.0, 2.0)});
  m.cpu_per_iteration_s = 2.0;  // the compute thread's CPU time, less than its 3 s of wall time
  SimConfig c = config(System::kWfbp, 2);
  c.latency_s = 0.25;
  c.host_cores = 1;
  c.stack_bytes_per_s = kPairBytes;  // a pair per CPU second: 2 s of stack per node
  SimResult r = simulate(m, c);      // a host per node: 2 + 2 = 4 s < 5.5 s
  EXPECT_DOUBLE_EQ(r.schedule_s, 5.5);
  EXPECT_DOUBLE_EQ(r.cpu_bound_s, 4.0);
  EXPECT_DOUBLE_EQ(r.iteration_s, 5.5);
  c.nodes_per_host = 2;  // both on one core: 2 x (2 + 2) = 8 s
  r = simulate(m, c);
  EXPECT_DOUBLE_EQ(r.cpu_bound_s, 8.0);
  EXPECT_DOUBLE_EQ(r.iteration_s, 8.0);
  EXPECT_DOUBLE_EQ(r.images_per_s, 2 * kBatch / 8.0);
  c.host_cores = 4;  // four cores: 2 s
  r = simulate(m, c);
  EXPECT_DOUBLE_EQ(r.cpu_bound_s, 2.0);
  EXPECT_DOUBLE_EQ(r.iteration_s, 5.5);
  c.host_cores = 1;
  c.stack_bytes_per_s = 0;  // a free stack, no CPU profile: the compute's wall time, 2 x 3 s
  m.cpu_per_iteration_s = -1;
  EXPECT_DOUBLE_EQ(simulate(m, c).cpu_bound_s, 6.0);
  c.batch = 2 * kBatch;  // a profile's CPU time scales with the batch: 2 x 2 x 2 s
  m.cpu_per_iteration_s = 2.0;
  EXPECT_DOUBLE_EQ(simulate(m, c).cpu_bound_s, 8.0);
}

TEST(Simulate, ServerCostIsChargedPerContributionAndStep) {
  const SimModel m = model({layer("a", 2 * kPairFloats, 1.0, 2.0)});
  SimConfig c = config(System::kWfbp, 2);
  c.reduce_bytes_per_s = 4 * kPairBytes;  // a pair summed in 0.25 s
  // The remote push arrives at 4 (the local one was summed at 3-3.25): sum 4-4.25, step
  // 4.25-4.5, back at 5.5.
  EXPECT_DOUBLE_EQ(simulate(m, c).iteration_s, 5.5);
}

TEST(Simulate, WfbpHidesTheUpperLayersSyncBehindTheBackward) {
  // Top layer 2 pairs per node (its sync: 4 s), bottom 1 pair (2 s); the bottom layer's
  // backward (5 s) is longer than the top layer's sync.
  const SimModel m = model({layer("bottom", 2 * kPairFloats, 1.0, 5.0), layer("top", 4 * kPairFloats, 1.0, 1.0)});
  const double compute = 8.0;
  EXPECT_DOUBLE_EQ(simulate(m, config(System::kWfbp, 2)).iteration_s, compute + 2.0);
  // Naive PS: both syncs after the backward, 3 pairs out and 3 back on each link.
  EXPECT_DOUBLE_EQ(simulate(m, config(System::kPs, 2)).iteration_s, compute + 6.0);
}

TEST(Simulate, PriorityLetsTheBottomLayerOvertake) {
  // Top: 32 pairs (16 per node out, 16 back: 32 s of uplink); bottom: 1 pair each way.
  const SimModel m = model({layer("bottom", 2 * kPairFloats, 1.0, 0.5), layer("top", 32 * kPairFloats, 1.0, 0.5)});
  SimConfig c = config(System::kWfbp, 2);
  c.order = Order::kFifo;
  // FIFO: the bottom pair waits behind the top's 16 pushes and, coming back, behind its
  // 16 pulls: the iteration is the top's backward end (2.5) plus 34 s of uplink.
  const SimResult fifo = simulate(m, c);
  EXPECT_DOUBLE_EQ(fifo.iteration_s, 36.5);
  c.order = Order::kPriority;
  const SimResult prio = simulate(m, c);
  // Priority: the bottom layer is back at 6.5, so the next forward of it (1 s) runs while
  // the top layer still syncs.
  EXPECT_DOUBLE_EQ(prio.iteration_s, 35.5);
  // The critical path: the bottom layer's own sync (backward end 3 to 6.5), then the top
  // layer's (the forward of the bottom ends at 7.5, the top is back at 36.5).
  EXPECT_DOUBLE_EQ(prio.layers[0].forward_wait_s, 3.5);
  EXPECT_DOUBLE_EQ(prio.layers[1].forward_wait_s, 29.0);
  EXPECT_DOUBLE_EQ(fifo.layers[0].forward_wait_s, 33.5);
  EXPECT_DOUBLE_EQ(fifo.layers[1].forward_wait_s, 0.0);
}

TEST(Simulate, SwitchCapacityBottleneck) {
  // 4 nodes, one pair per shard: 12 pushes and 12 pulls cross the switch.
  const SimModel m = model({layer("a", 4 * kPairFloats, 1.0, 2.0)});
  SimConfig c = config(System::kWfbp, 4);
  // Non-blocking: the last shard (node 3) gets its three pushes, all sent at 2, by 5 and
  // sends its three pulls by 8: at most 3 s of compute + 8 s (the run staggers: 10 s).
  const double free_switch = simulate(m, c).iteration_s;
  EXPECT_LE(free_switch, 3.0 + 8.0);
  c.switch_bytes_per_s = kPairBytes;  // the whole switch as fast as one link
  // 24 pair-seconds per iteration through the switch, and it never idles: nodes whose
  // pulls come back first compute the next iteration meanwhile, so compute is hidden.
  EXPECT_DOUBLE_EQ(simulate(m, c).iteration_s, 24.0);
  EXPECT_GT(24.0, 2 * free_switch);
}

TEST(Simulate, SfbExchangesFactorsDuringTheBackwardThenReconstructs) {
  const SimLayer fc = fcLayer("fc", 4096, 4096, 1.0, 2.0);
  const SimModel m = model({fc});
  SimConfig c = config(System::kPoseidon, 2);
  const double factor_bytes = 32.0 * (4096 + 4096) * 4;  // K (M + N) floats
  const double gemm = 2.0 * 4096 * 4096 * 32;            // one peer's share
  c.bandwidth_bytes_per_s = factor_bytes;                // 1 s on the wire
  c.gemm_flops_per_s = gemm;                             // 1 s of reconstruction
  const SimResult r = simulate(m, c);
  ASSERT_EQ(r.layers[0].scheme, Scheme::kSFB);
  // The factors leave when the backward starts and arrive before it ends (3): 3 + 1.
  EXPECT_DOUBLE_EQ(r.iteration_s, 4.0);
  c.bandwidth_bytes_per_s = factor_bytes / 5;  // now they arrive at 1 + 5
  EXPECT_DOUBLE_EQ(simulate(m, c).iteration_s, 7.0);
}

TEST(Simulate, FactorsGoIn16BitsExceptUnderErrorFeedback) {
  // The layer above with 5 s of fp32 factors: they leave at 1, so 1 + 5 + 1 s of
  // reconstruction. In bf16 they take 2.5 s (the backward still ends at 3): 4.5. Error
  // feedback sends them fp32 again (sim_config.h).
  const SimModel m = model({fcLayer("fc", 4096, 4096, 1.0, 2.0)});
  SimConfig c = config(System::kPoseidon, 2);
  const double factor_bytes = 32.0 * (4096 + 4096) * 4;
  c.bandwidth_bytes_per_s = factor_bytes / 5;
  c.gemm_flops_per_s = 2.0 * 4096 * 4096 * 32;
  c.wire = WireFormat::kBf16;
  SimResult r = simulate(m, c);
  ASSERT_EQ(r.layers[0].scheme, Scheme::kSFB);
  EXPECT_DOUBLE_EQ(r.iteration_s, 4.5);
  EXPECT_DOUBLE_EQ(r.layers[0].bytes_sent_per_node, factor_bytes / 2);
  c.error_feedback = true;
  r = simulate(m, c);
  EXPECT_DOUBLE_EQ(r.iteration_s, 7.0);
  EXPECT_DOUBLE_EQ(r.layers[0].bytes_sent_per_node, factor_bytes);
}

TEST(Simulate, ReconstructionOnTheDeviceDelaysTheBackwardBelow) {
  // An FC layer (1 s of factors, 1 s of reconstruction) above a one-float conv layer whose
  // backward takes 4 s. The factors are in at 3; the FC's backward ends at 4.
  const SimLayer fc = fcLayer("fc", 4096, 4096, 1.0, 2.0);
  const SimModel m = model({layer("conv", 1, 1.0, 4.0), fc});
  SimConfig c = config(System::kPoseidon, 2);
  c.bandwidth_bytes_per_s = 32.0 * (4096 + 4096) * 4;
  c.gemm_flops_per_s = 2.0 * 4096 * 4096 * 32;
  // On the device the reconstruction runs 4-5, the conv's backward 5-9: 9 s (+ 8 bytes).
  EXPECT_NEAR(simulate(m, c).iteration_s, 9.0, 1e-4);
  // On a resource of its own it overlaps the conv's backward: 8 s.
  c.reconstruct_on_device = false;
  EXPECT_NEAR(simulate(m, c).iteration_s, 8.0, 1e-4);
}

TEST(Simulate, HostCpuBoundChargesSfbReconstruction) {
  // The SFB layer above: 4 s of schedule, 1 s of reconstruction per node. Two nodes on one
  // core, 3 s of compute CPU each: (3 + 1) x 2 = 8 s of the core's time.
  SimModel m = model({fcLayer("fc", 4096, 4096, 1.0, 2.0)});
  m.cpu_per_iteration_s = 3.0;
  SimConfig c = config(System::kPoseidon, 2);
  c.bandwidth_bytes_per_s = 32.0 * (4096 + 4096) * 4;
  c.gemm_flops_per_s = 2.0 * 4096 * 4096 * 32;
  c.host_cores = 1;
  c.nodes_per_host = 2;
  const SimResult r = simulate(m, c);
  ASSERT_EQ(r.layers[0].scheme, Scheme::kSFB);
  EXPECT_DOUBLE_EQ(r.schedule_s, 4.0);
  EXPECT_DOUBLE_EQ(r.cpu_bound_s, 8.0);
  EXPECT_DOUBLE_EQ(r.iteration_s, 8.0);
}

TEST(Simulate, CalibrationReproducesVgg19AndIsOneRate) {
  SimConfig c;
  c.device_flops_per_s = calibratedDeviceRate();
  c.batch = kPaperVgg19.batch;
  EXPECT_NEAR(simulate(paperModel("vgg19"), c).images_per_s, kPaperVgg19.images_per_s, 1e-9);
  // VGG19's forward, from the architecture: 19.6 G multiply-adds per image.
  EXPECT_NEAR(paperModel("vgg19").forwardFlopsPerExample(), 39.0e9, 0.5e9);
  EXPECT_NEAR(static_cast<double>(paperModel("vgg19-22k").params()), 229e6, 2e6);  // the paper's 229 M
}

TEST(Simulate, PaperModelsHaveTheirKnownSizes) {
  // Parameter counts of the reference implementations (torchvision / Caffe), BN folded in.
  EXPECT_NEAR(static_cast<double>(paperModel("alexnet").params()), 61.0e6, 0.1e6);
  EXPECT_NEAR(static_cast<double>(paperModel("googlenet").params()), 7.0e6, 0.1e6);
  EXPECT_NEAR(static_cast<double>(paperModel("resnet-152").params()), 60.2e6, 0.1e6);
  EXPECT_NEAR(static_cast<double>(paperModel("inception-v3").params()), 23.8e6, 0.2e6);
  EXPECT_THROW(paperModel("lenet"), InputError);
}

TEST(Simulate, BestSchemeTurnsSfbBackToPsAsNodesGrow) {
  SimConfig c;
  c.batch = 32;
  c.nodes = 32;
  const SimModel m = paperModel("vgg19-22k");
  int sfb32 = 0, sfb256 = 0;
  for (const auto& s : planSync(m, c)) sfb32 += s.scheme == Scheme::kSFB;
  c.nodes = 256;
  for (const auto& s : planSync(m, c)) sfb256 += s.scheme == Scheme::kSFB;
  EXPECT_EQ(sfb32, 3);   // fc6, fc7, fc8
  EXPECT_EQ(sfb256, 0);  // 2K(P1-1)(M+N) passes the PS's 2MN(2P1-2)/P1
  // The time rule also charges the reconstruction, 2MNK(P1-1) flops: at 128 nodes on
  // 40 GbE at the calibrated rate it costs more than the bytes it saves.
  c.nodes = 128;
  c.bandwidth_bytes_per_s = 5e9;
  c.device_flops_per_s = calibratedDeviceRate();
  int bytes128 = 0, time128 = 0;
  for (const auto& s : planSync(m, c)) bytes128 += s.scheme == Scheme::kSFB;
  c.rule = CostRule::kTime;
  for (const auto& s : planSync(m, c)) time128 += s.scheme == Scheme::kSFB;
  EXPECT_EQ(bytes128, 3);
  EXPECT_LT(time128, bytes128);
}

// How long it takes is a benchmark's question (bench/simulator/simulator_vs_paper.py times it), not a
// unit test's: under the sanitizers it runs ten times slower.
TEST(Simulate, Vgg19_22kAt256NodesCompletes) {
  SimConfig c;
  c.nodes = 256;
  c.batch = 32;
  c.device_flops_per_s = calibratedDeviceRate();
  c.bandwidth_bytes_per_s = 5e9;
  const SimResult r = simulate(paperModel("vgg19-22k"), c);
  EXPECT_GT(r.messages, 1000000);
  EXPECT_GT(r.iteration_s, r.compute_s);
}

TEST(Simulate, CoarsePlacementScalesWorstOnVgg19_22k) {
  SimConfig c;
  c.nodes = 16;
  c.batch = 32;
  c.device_flops_per_s = calibratedDeviceRate();
  c.bandwidth_bytes_per_s = 5e9;
  const SimModel m = paperModel("vgg19-22k");
  c.system = System::kPoseidon;
  const double poseidon = simulate(m, c).images_per_s;
  c.system = System::kCoarse;
  const double coarse = simulate(m, c).images_per_s;
  EXPECT_LT(coarse, 0.5 * poseidon);
}

TEST(Simulate, BadConfigIsAnInputError) {
  SimConfig c;
  c.nodes = 0;
  EXPECT_THROW(simulate(paperModel("vgg19"), c), InputError);
  // The option is named as a field, which `poseidon simulate` says as its flag.
  const auto refuses = [](const SimConfig& bad, const std::string& field) {
    try {
      bad.validate();
      ADD_FAILURE() << "accepted a config without " << field;
    } catch (const OptionError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  };
  c = SimConfig();
  c.device_flops_per_s = 1e12;
  c.host_cores = -1;
  refuses(c, "host_cores");
  c.host_cores = 2;
  c.nodes_per_host = 0;
  refuses(c, "nodes_per_host");
  c.nodes_per_host = 1;
  c.stack_bytes_per_s = -1;
  refuses(c, "stack_rate");
  c.stack_bytes_per_s = 1e9;
  EXPECT_NO_THROW(c.validate());
  c.error_feedback = true;  // on an fp32 wire: nothing to feed back
  refuses(c, "error_feedback");
  EXPECT_THROW(parseSystem("horovod"), InputError);
  EXPECT_THROW(parseOrder("random"), InputError);
}

}  // namespace
}  // namespace poseidon::sim
