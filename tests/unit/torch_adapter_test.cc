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
  torch::optim::SGD sgd(plain->parameters(),
                        torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
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

std::vector<torch::Tensor> flatParameters(const torch::nn::Sequential& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

// Two workers (threads over the loopback hub) with their own data must end where one plain
// LibTorch loop over both batches together ends, and away from where they started: equal
// parameters alone would also hold if no update were ever applied.
TEST(TorchAdapter, TwoRanksAsThreadsEqualOneLoopOverBothBatches) {
  torch::set_num_threads(1);
  const int iterations = 5;
  Options o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  // Built here, not in the threads: the global generator is not for concurrent use.
  std::vector<torch::nn::Sequential> nets;
  torch::manual_seed(5);
  nets.push_back(smallNet());
  torch::manual_seed(99);  // rank 1's initial values must be replaced by rank 0's
  nets.push_back(smallNet());
  const auto initial = flatParameters(nets[0]);
  torch::manual_seed(7);
  const auto xs = torch::randn({2, 8, 1, 8, 8});
  const auto ys = torch::randint(0, 3, {2, 8}, torch::kLong);
  testing::runRanks(2, [&](Transport& t, int rank) {
    TorchModel model(t, nets[rank], "small", o);
    for (int it = 0; it < iterations; ++it) {
      torch::nn::functional::cross_entropy(model.forward(xs[rank]), ys[rank]).backward();
      model.step();
    }
    model.finish();
  });

  torch::manual_seed(5);
  auto plain = smallNet();
  torch::optim::SGD sgd(plain->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  for (int it = 0; it < iterations; ++it) {
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(plain->forward(xs.flatten(0, 1)), ys.flatten()).backward();
    sgd.step();
  }
  const auto want = flatParameters(plain);
  for (int rank = 0; rank < 2; ++rank) {
    const auto got = flatParameters(nets[rank]);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double off = ((got[i] - want[i]).norm() / want[i].norm()).item<double>();
      const double moved = ((got[i] - initial[i]).norm() / initial[i].norm()).item<double>();
      EXPECT_LE(off, 1e-5) << "rank " << rank << " tensor " << i;
      EXPECT_GT(moved, 1e-4) << "rank " << rank << " tensor " << i << " never moved";
    }
  }
}

}  // namespace
}  // namespace poseidon
