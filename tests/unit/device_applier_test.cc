// The two FactorAppliers of an SFB layer agree: the session's host applier (blocked BLAS
// fused with SGD, sfb/host_applier.h) and the adapter's device applier (one GEMM and SGD
// in torch, torch/device_applier.h), here on the CPU. On a GPU the same code runs on an
// update stream (gpu.* tests); these check its arithmetic and its state records.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <vector>

#include "sfb/host_applier.h"
#include "torch/device_applier.h"

namespace poseidon {
namespace {

constexpr std::int64_t M = 5, N = 7, kRows = 6;

struct Layer {
  torch::Tensor weight = torch::randn({M, N});
  torch::Tensor bias = torch::randn({M});
  std::vector<float*> pointers() { return {weight.data_ptr<float>(), bias.data_ptr<float>()}; }
  Layer clone() const {
    Layer c;
    c.weight = weight.clone();
    c.bias = bias.clone();
    return c;
  }
};

double relativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item<double>();
}

// `steps` steps of both appliers on the same factors (step s: `rows(s)` rows).
void stepBoth(
    FactorApplier& host, FactorApplier& device, const SgdOptions& o, int steps,
    std::int64_t (*rows)(int) = [](int) { return kRows; }) {
  for (int s = 0; s < steps; ++s) {
    const auto U = torch::randn({rows(s), M}), V = torch::randn({rows(s), N});
    const StackedFactors f{U.data_ptr<float>(), V.data_ptr<float>(), rows(s), M, N};
    host.apply(f, 0.5f, o, s == 0);
    device.apply(f, 0.5f, o, s == 0);
  }
}

TEST(DeviceFactorApplier, StepsAsTheHostApplierWithMomentumAndWeightDecay) {
  torch::manual_seed(1);
  Layer a, b = a.clone();
  HostFactorApplier host(M, N, a.pointers());
  DeviceFactorApplier device({b.weight, b.bias});
  stepBoth(host, device, SgdOptions{0.1f, 0.9f, 0.01f}, 4);
  EXPECT_LE(relativeDifference(b.weight, a.weight), 1e-6);
  EXPECT_LE(relativeDifference(b.bias, a.bias), 1e-6);
  // The digests' views: weight, bias, then both momenta, in the same order and sizes.
  const auto hr = host.replicated(), dr = device.replicated();
  ASSERT_EQ(dr.size(), 4u);
  for (std::size_t i = 0; i < dr.size(); ++i) EXPECT_EQ(hr[i].bytes, dr[i].bytes) << i;
}

TEST(DeviceFactorApplier, NoRowsIsAZeroGradient) {
  torch::manual_seed(2);
  Layer a, b = a.clone();
  HostFactorApplier host(M, N, a.pointers());
  DeviceFactorApplier device({b.weight, b.bias});
  // Weight decay alone moves the weight: the same on both sides.
  stepBoth(host, device, SgdOptions{0.1f, 0.0f, 0.5f}, 2, [](int) -> std::int64_t { return 0; });
  EXPECT_LE(relativeDifference(b.weight, a.weight), 1e-6);
  EXPECT_LE(relativeDifference(b.bias, a.bias), 1e-6);
}

TEST(DeviceFactorApplier, GradientModeWritesTheMeanGradientOnly) {
  torch::manual_seed(3);
  Layer layer, before = layer.clone();
  DeviceFactorApplier device({layer.weight, layer.bias});
  auto gw = torch::full({M, N}, 7.0f), gb = torch::full({M}, 7.0f);
  device.setGradientTarget({gw, gb});
  const auto U = torch::randn({kRows, M}), V = torch::randn({kRows, N});
  SgdOptions o;
  o.gradient_only = true;
  device.apply(StackedFactors{U.data_ptr<float>(), V.data_ptr<float>(), kRows, M, N}, 0.25f, o, true);
  EXPECT_LE(relativeDifference(gw, U.t().mm(V) * 0.25f), 1e-6);
  EXPECT_LE(relativeDifference(gb, U.sum(0) * 0.25f), 1e-6);
  EXPECT_TRUE(torch::equal(layer.weight, before.weight));
}

TEST(DeviceFactorApplier, MomentumRecordsRestoreIntoTheDevice) {
  torch::manual_seed(4);
  Layer a, b = a.clone(), other;
  DeviceFactorApplier first({a.weight, a.bias}), second({b.weight, b.bias});
  HostFactorApplier host(M, N, other.pointers());  // stepBoth's other side, not checked here
  stepBoth(host, first, SgdOptions{0.1f, 0.9f}, 2);
  std::vector<StateRecord> saved, restored;
  first.addMomentumRecords("sfb/fc/", saved);
  second.addMomentumRecords("sfb/fc/", restored);  // zeros, made for the restore
  ASSERT_EQ(saved.size(), 2u);
  ASSERT_EQ(restored.size(), 2u);
  EXPECT_EQ(saved[0].name, "sfb/fc/weight_momentum");
  EXPECT_EQ(saved[1].name, "sfb/fc/bias_momentum");
  for (std::size_t i = 0; i < saved.size(); ++i) {
    ASSERT_EQ(saved[i].bytes, restored[i].bytes);
    std::memcpy(restored[i].data, saved[i].data, saved[i].bytes);
  }
  second.momentumRestored();
  b.weight.copy_(a.weight);
  b.bias.copy_(a.bias);
  // The same next step from the same state (not a first step: the momentum is used).
  const auto U = torch::randn({kRows, M}), V = torch::randn({kRows, N});
  const StackedFactors f{U.data_ptr<float>(), V.data_ptr<float>(), kRows, M, N};
  first.apply(f, 0.5f, SgdOptions{0.1f, 0.9f}, false);
  second.apply(f, 0.5f, SgdOptions{0.1f, 0.9f}, false);
  EXPECT_TRUE(torch::equal(a.weight, b.weight));
  EXPECT_TRUE(torch::equal(a.bias, b.bias));
}

}  // namespace
}  // namespace poseidon
