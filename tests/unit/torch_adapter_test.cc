// The LibTorch adapter over the loopback transport: hooks, per-layer waits, and one
// worker training exactly like a plain LibTorch loop with torch::optim::SGD.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "comm/loopback_transport.h"
#include "models/model_spec.h"
#include "poseidon/torch.h"
#include "test_ranks.h"
#include "torch/model_builder.h"

namespace poseidon {
namespace {

TEST(TorchAdapter, DescribesBuiltNetsLikeTheEngineFreeSpec) {
  for (const char* name : {"fcnet", "convnet", "mlp"}) {
    ModelSpec spec = builtinModel(name);
    auto net = buildSequential(spec);
    EXPECT_EQ(describeSequential(net, name).describe(), modelInfoFromSpec(spec).describe()) << name;
  }
}

torch::nn::Sequential smallNet() {
  return buildSequential(parseModelText(
      "input 1 8 8\nclasses 3\nconv 4 3 pad=1\nrelu\npool 2\nflatten\nfc 16\nrelu\nfc 3\n", "test", "small"));
}

TEST(TorchAdapter, OneWorkerEqualsPlainLibTorchLoop) {
  torch::set_num_threads(1);
  const int iterations = 20;
  Options o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 1e-3f;
  torch::manual_seed(3);
  auto xs = torch::randn({iterations, 16, 1, 8, 8});
  auto ys = torch::randint(0, 3, {iterations, 16}, torch::kLong);

  torch::manual_seed(11);
  auto plain = smallNet();
  torch::optim::SGD sgd(plain->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  for (int it = 0; it < iterations; ++it) {
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(plain->forward(xs[it]), ys[it]).backward();
    sgd.step();
  }

  torch::manual_seed(11);
  auto net = smallNet();
  for (bool wfbp : {true, false}) {
    torch::manual_seed(11);
    net = smallNet();
    o.wfbp = wfbp;
    LoopbackHub hub(1);
    TorchModel model(hub.transport(0), net, "small", o);
    for (int it = 0; it < iterations; ++it) {
      torch::nn::functional::cross_entropy(model.forward(xs[it]), ys[it]).backward();
      model.step();
    }
    model.finish();
    auto a = plain->parameters(), b = net->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double rel = ((a[i] - b[i]).norm() / a[i].norm()).item<double>();
      EXPECT_LE(rel, 1e-5) << "tensor " << i << " wfbp " << wfbp;
    }
  }
}

TEST(TorchAdapter, TwoRanksAsThreadsEndWithIdenticalParameters) {
  torch::set_num_threads(1);
  std::vector<std::vector<float>> finals(2);
  testing::runRanks(2, [&](Transport& t, int rank) {
    torch::manual_seed(rank == 0 ? 5 : 99);  // rank 1's initial values must be replaced
    auto net = smallNet();
    Options o;
    TorchModel model(t, net, "small", o);
    auto x = torch::randn({8, 1, 8, 8});
    auto y = torch::randint(0, 3, {8}, torch::kLong);
    for (int it = 0; it < 5; ++it) {
      torch::nn::functional::cross_entropy(model.forward(x), y).backward();
      model.step();
    }
    model.finish();
    for (auto& p : net->parameters()) {
      auto* d = p.data_ptr<float>();
      finals[rank].insert(finals[rank].end(), d, d + p.numel());
    }
  });
  EXPECT_EQ(finals[0], finals[1]);
}

}  // namespace
}  // namespace poseidon
