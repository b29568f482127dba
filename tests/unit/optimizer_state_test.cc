// Optimizer and random state in checkpoints (src/torch/optimizer_state.h,
// src/torch/random_state.h) and the built-in ResNet's module tree (src/torch/resnet.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "comm/control_channel.h"
#include "comm/loopback_transport.h"
#include "common/wait.h"
#include "poseidon/errors.h"
#include "torch/optimizer_state.h"
#include "torch/random_state.h"
#include "torch/resnet.h"

namespace poseidon {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

std::vector<torch::Tensor> makeParams() {
  torch::manual_seed(3);
  return {torch::randn({4, 3}), torch::randn({3})};
}

// `steps` steps on gradients that depend on the step and the parameters.
void train(torch::optim::Optimizer& opt, std::vector<torch::Tensor>& params, int first, int steps) {
  for (int s = first; s < first + steps; ++s) {
    for (auto& p : params) p.mutable_grad() = torch::sin(p.detach() * (s + 1)) + 0.1 * s;
    opt.step();
  }
}

std::vector<torch::Tensor> fresh(const std::vector<torch::Tensor>& from) {
  std::vector<torch::Tensor> out;
  for (const auto& p : from) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

void expectBitEqual(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

const std::vector<std::pair<const char*, MakeOptimizer>>& optimizers() {
  static const std::vector<std::pair<const char*, MakeOptimizer>> all = {
      {"adam", [](auto p) { return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(0.01)); }},
      {"adam amsgrad",
       [](auto p) {
         return std::make_unique<torch::optim::Adam>(p,
                                                     torch::optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.1));
       }},
      {"adamw", [](auto p) { return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(0.01)); }},
      {"sgd momentum",
       [](auto p) {
         return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(0.1));
       }},
  };
  return all;
}

TEST(OptimizerState, CreatingStateUpFrontChangesNoStep) {
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto base = makeParams();
    auto a = fresh(base), b = fresh(base);
    auto lazy = make(a), eager = make(b);
    const auto records = optimizerStateRecords(*eager, "opt");
    EXPECT_FALSE(records.empty());
    for (const auto& r : records) {
      std::vector<char> zeros(r.bytes, 0);
      EXPECT_EQ(std::memcmp(r.data, zeros.data(), r.bytes), 0) << r.name << " starts at zero";
    }
    train(*lazy, a, 0, 3);
    train(*eager, b, 0, 3);
    expectBitEqual(a, b);
  }
}

TEST(OptimizerState, RestoredStateContinuesExactly) {
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto through = fresh(makeParams());
    auto opt = make(through);
    OptimizerState state(*opt, "opt");
    train(*opt, through, 0, 2);
    // A checkpoint: the parameters and the state's bytes.
    auto resumed = fresh(through);
    std::vector<std::vector<char>> saved;
    for (const auto& r : state.records()) {
      const char* p = static_cast<const char*>(r.data);
      saved.emplace_back(p, p + r.bytes);
    }
    // A new process: a fresh optimizer, its state filled from the checkpoint.
    auto opt2 = make(resumed);
    OptimizerState state2(*opt2, "opt");
    auto records = state2.records();
    ASSERT_EQ(records.size(), saved.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      ASSERT_EQ(records[i].bytes, saved[i].size()) << records[i].name;
      std::memcpy(records[i].data, saved[i].data(), saved[i].size());
    }
    state2.afterRestore();
    train(*opt, through, 2, 3);
    train(*opt2, resumed, 2, 3);
    expectBitEqual(through, resumed);
  }
}

TEST(OptimizerState, StepCountsAreRecorded) {
  auto params = fresh(makeParams());
  torch::optim::Adam opt(params, torch::optim::AdamOptions(0.01));
  OptimizerState state(opt, "opt");
  train(opt, params, 0, 4);
  const auto records = state.records();
  ASSERT_EQ(records.back().name, "opt/steps");
  ASSERT_EQ(records.back().bytes, 2 * sizeof(std::int64_t));
  EXPECT_EQ(static_cast<const std::int64_t*>(records.back().data)[1], 4);
}

TEST(OptimizerState, OtherOptimizersAreRefused) {
  auto params = fresh(makeParams());
  torch::optim::RMSprop opt(params, torch::optim::RMSpropOptions(0.01));
  EXPECT_THROW(optimizerStateRecords(opt, "opt"), InputError);
}

// The random state goes into the core's records ("random/cpu"), is read back without the
// other records' sizes (a Python job applies it before its session exists), and a restore
// through the records draws what the saving run drew next.
TEST(RandomState, ARestoredStateDrawsWhatTheSavedRunDrewNext) {
  char tmpl[] = "/tmp/poseidon-random-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  LoopbackHub hub(1);
  FailureState failure;
  ControlChannel control(hub.transport(0), std::chrono::seconds(5), failure);
  std::vector<float> a = {1, 2, 3};
  torch::manual_seed(11);
  torch::rand({5});
  RandomState saved = RandomState::take({});
  std::vector<StateRecord> records = {{"a", a.data(), 12}};
  saved.addRecords(records);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].name, "random/cpu");
  Checkpointer(dir, control, 0, 1).save(3, "cfg", records);
  const torch::Tensor next = torch::rand({5});

  const CheckpointInfo info = Checkpointer::latest(dir);
  RandomState read = RandomState::read(info, 0);
  ASSERT_FALSE(read.empty());
  torch::manual_seed(99);
  read.apply();
  EXPECT_TRUE(torch::equal(torch::rand({5}), next));
  // The collective load restores the same bytes through the records.
  torch::manual_seed(99);
  std::vector<float> a2(3);
  std::vector<StateRecord> into = {{"a", a2.data(), 12}};
  read.addRecords(into);
  Checkpointer(dir, control, 0, 1).load(info, into);
  read.apply();
  EXPECT_TRUE(torch::equal(torch::rand({5}), next));
  EXPECT_EQ(a2, a);
  // A file without random records (an older Python checkpoint) reads as empty.
  Checkpointer(dir, control, 0, 1).save(4, "cfg", {{"a", a.data(), 12}});
  EXPECT_TRUE(RandomState::read(Checkpointer::latest(dir), 0).empty());
  // Not std::filesystem: in a program linked with libtorch its symbols may resolve to
  // libtorch's copies, built for another ABI.
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

TEST(ResNet, PathsReadLikeTorchvision) {
  torch::manual_seed(0);
  ResNet net;
  std::vector<std::string> names;
  for (const auto& p : net->named_parameters()) names.push_back(p.key());
  for (const char* want :
       {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight", "layer2.0.bn1.bias", "layer2.0.downsample.0.weight",
        "layer2.0.downsample.1.weight", "layer2.1.conv1.weight", "layer3.1.conv2.weight", "fc.weight", "fc.bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  // The first stage keeps stride and channels: an identity shortcut.
  EXPECT_EQ(std::find(names.begin(), names.end(), "layer1.0.downsample.0.weight"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "layer2.1.downsample.0.weight"), names.end());
  EXPECT_EQ(net->forward(torch::randn({2, 1, 28, 28})).sizes(), (std::vector<std::int64_t>{2, 10}));
  std::int64_t buffers = 0;
  for (const auto& b : net->named_buffers()) buffers += b.key().find("running_mean") != std::string::npos;
  EXPECT_EQ(buffers, 15);  // stem, 2 per block (6 blocks), 2 downsamples
}

}  // namespace
}  // namespace poseidon
