// The general LibTorch adapter over the loopback transport (threads as ranks): a residual
// model with BatchNorm trained data-parallel equals one replica that runs every worker's
// micro-batch, averages their gradients and steps — for every scheme, server-side SGD and
// Adam in gradient mode, one or two backward passes per step, either buffer mode. Also a
// Linear on a 3-D input, frozen parameters and a layer that gets no gradient.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <mutex>

#include "poseidon/errors.h"
#include "poseidon/torch.h"
#include "test_ranks.h"

namespace poseidon {
namespace {

constexpr int kIterations = 20;
constexpr int kBatch = 8;  // per worker

// conv-BN-relu (convs without bias, as in ResNet: a bias before BatchNorm gets a zero
// gradient, which Adam would turn into steps of rounding noise), a residual conv-BN block, two Linear layers (the first
// through poseidon::linear, so it may go by SFB; the second called plainly, so it may not).
struct ResidualNetImpl : torch::nn::Module {
  ResidualNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(4))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(4))),
        fc1(register_module("fc1", torch::nn::Linear(4 * 6 * 6, 24))),
        fc2(register_module("fc2", torch::nn::Linear(24, 3))) {}
  torch::Tensor forward(torch::Tensor x) {
    auto h = torch::relu(bn1(conv1(x)));
    h = torch::relu(bn2(conv2(h)) + h);
    h = torch::relu(poseidon::linear(fc1, h.flatten(1)));
    return fc2(h);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(ResidualNet);

// Threads as ranks share LibTorch's default generator (and the probe saves and restores
// it), so every rank's model is made before the ranks start: its initial values then
// depend on its seed alone.
template <class Net>
Net seeded(std::uint64_t seed) {
  torch::manual_seed(seed);
  return Net();
}

template <class Net>
std::vector<Net> seededPerRank(int ranks, std::uint64_t root_seed, std::uint64_t other_seed) {
  std::vector<Net> nets;
  for (int r = 0; r < ranks; ++r) nets.push_back(seeded<Net>(r == 0 ? root_seed : other_seed + r));
  return nets;
}

struct RunSetup {
  std::string scheme = "ps";
  bool adam = false;  // gradient mode with torch::optim::Adam; else server-side SGD
  int passes = 1;
  std::string buffers = "broadcast";
  int ranks = 4;
};

Options optionsFor(const RunSetup& s) {
  Options o;
  o.lr = 0.02f;
  o.momentum = 0.9f;
  o.scheme = s.scheme;
  o.gradient_mode = s.adam;
  o.backward_passes_per_step = s.passes;
  o.buffers = s.buffers;
  o.batch = kBatch;
  o.timeout = std::chrono::seconds(30);
  return o;
}

// The small models' runs: server-side SGD (momentum 0.9), a short timeout.
Options smallRunOptions(const std::string& scheme) {
  Options o;
  o.lr = 0.05f;
  o.scheme = scheme;
  o.batch = kBatch;
  o.timeout = std::chrono::seconds(30);
  return o;
}

std::unique_ptr<torch::optim::Optimizer> optimizerFor(const RunSetup& s, torch::nn::Module& m) {
  if (s.adam) return std::make_unique<torch::optim::Adam>(m.parameters(), torch::optim::AdamOptions(1e-2));
  return std::make_unique<torch::optim::SGD>(m.parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));
}

struct Data {
  torch::Tensor x, y;  // [iterations][ranks * kBatch]...
};

Data makeData(int ranks) {
  torch::manual_seed(7);
  return Data{torch::randn({kIterations, ranks * kBatch, 1, 6, 6}),
              torch::randint(0, 3, {kIterations, ranks * kBatch})};
}

// Rank r's micro-batch of pass h in iteration `it`.
std::pair<torch::Tensor, torch::Tensor> slice(const Data& d, int it, int rank, int pass, int passes) {
  const int part = kBatch / passes;
  const int from = rank * kBatch + pass * part;
  return {d.x[it].narrow(0, from, part), d.y[it].narrow(0, from, part)};
}

std::vector<torch::Tensor> stateOf(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.detach().clone());
  for (auto& b : m.buffers()) out.push_back(b.detach().clone().to(torch::kDouble));
  return out;
}

void setBuffers(torch::nn::Module& m, const std::vector<torch::Tensor>& values) {
  auto bs = m.buffers();
  for (std::size_t i = 0; i < bs.size(); ++i) bs[i].copy_(values[i]);
}

std::vector<torch::Tensor> buffersOf(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& b : m.buffers()) out.push_back(b.detach().clone());
  return out;
}

// One replica, every worker's micro-batches in turn; buffers as the mode defines (each
// forward starts from the agreed buffers; after it, rank 0's or the mean are agreed).
std::vector<torch::Tensor> reference(const RunSetup& s, const Data& d) {
  torch::manual_seed(1);
  ResidualNet net;
  auto opt = optimizerFor(s, *net);
  auto agreed = buffersOf(*net);
  for (int it = 0; it < kIterations; ++it) {
    opt->zero_grad();
    for (int h = 0; h < s.passes; ++h) {
      std::vector<std::vector<torch::Tensor>> after;
      for (int r = 0; r < s.ranks; ++r) {
        setBuffers(*net, agreed);
        auto [x, y] = slice(d, it, r, h, s.passes);
        torch::nn::functional::cross_entropy(net->forward(x), y).backward();
        after.push_back(buffersOf(*net));
      }
      for (std::size_t b = 0; b < agreed.size(); ++b) {
        if (s.buffers == "average" && agreed[b].is_floating_point()) {
          auto sum = torch::zeros_like(agreed[b], torch::kDouble);
          for (auto& a : after) sum += a[b].to(torch::kDouble);
          agreed[b] = (sum / s.ranks).to(agreed[b].scalar_type());
        } else {
          agreed[b] = after[0][b];
        }
      }
    }
    for (auto& p : net->parameters()) p.mutable_grad().div_(s.ranks * s.passes);
    opt->step();
  }
  setBuffers(*net, agreed);
  return stateOf(*net);
}

struct Distributed {
  std::vector<std::vector<torch::Tensor>> finals;       // every rank's parameters and buffers
  std::vector<std::vector<torch::Tensor>> mid_buffers;  // as a forward in mid-run starts
  // One element per rank thread: not vector<bool>, whose packed bits make concurrent writes a race.
  std::vector<char> fc1_by_factors;
};

Distributed distributed(const RunSetup& s, const Data& d) {
  Distributed out{std::vector<std::vector<torch::Tensor>>(s.ranks), std::vector<std::vector<torch::Tensor>>(s.ranks),
                  std::vector<char>(s.ranks, 0)};
  auto& finals = out.finals;
  auto nets = seededPerRank<ResidualNet>(s.ranks, 1, 100);  // other ranks' values must be replaced
  testing::runRanks(s.ranks, [&](Transport& t, int rank) {
    auto net = nets[rank];
    auto example = slice(d, 0, rank, 0, 1).first;
    TorchModel model(t, net, "residual", optionsFor(s), [&] { net->forward(example); });
    out.fc1_by_factors[rank] = usesFactors(model.session().plan()[4].scheme);
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (s.adam) opt = optimizerFor(s, *net);
    for (int it = 0; it < kIterations; ++it) {
      for (int h = 0; h < s.passes; ++h) {
        auto [x, y] = slice(d, it, rank, h, s.passes);
        auto output = model.forward([&] {
          // The forward scope has made the buffers equal by now.
          if (it == kIterations / 2 && h == 0) out.mid_buffers[rank] = buffersOf(*net);
          return net->forward(x);
        });
        // Horovod's accumulation: the passes' gradients are summed, each loss divided.
        (torch::nn::functional::cross_entropy(output, y) / s.passes).backward();
      }
      model.step();
      if (opt) {
        opt->step();
        opt->zero_grad();
      }
    }
    model.synchronize();
    finals[rank] = stateOf(*net);
    model.finish();
  });
  return out;
}

double relativeDifference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(a[i].to(torch::kDouble).norm().item<double>(), 1e-12);
    worst = std::max(worst, (a[i].to(torch::kDouble) - b[i].to(torch::kDouble)).norm().item<double>() / scale);
  }
  return worst;
}

void expectEqualsReference(const RunSetup& s, double tolerance = 1e-5) {
  torch::set_num_threads(1);
  const Data d = makeData(s.ranks);
  const auto want = reference(s, d);
  torch::manual_seed(1);
  const auto initial = stateOf(*ResidualNet());
  const auto run = distributed(s, d);
  const auto& got = run.finals;
  // Training moved the parameters: a run that applied no update would fail here.
  EXPECT_GT(relativeDifference(want, initial), 1e-3);
  // fc1 (through poseidon::linear) really went by sufficient factors where asked.
  if (s.scheme == "sfb" || s.scheme == "auto") EXPECT_TRUE(run.fc1_by_factors[0]) << s.scheme;
  if (s.scheme == "ps" || s.scheme == "allreduce") EXPECT_FALSE(run.fc1_by_factors[0]) << s.scheme;
  // Every forward starts from equal buffers, not only the end.
  for (int r = 1; r < s.ranks; ++r) {
    EXPECT_LE(relativeDifference(run.mid_buffers[0], run.mid_buffers[r]), 0.0) << "rank " << r;
  }
  for (int r = 0; r < s.ranks; ++r) {
    EXPECT_LE(relativeDifference(want, got[r]), tolerance) << "rank " << r << " scheme " << s.scheme;
  }
}

class SchemeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SchemeTest, ResidualBatchNormSgdEqualsReference) { expectEqualsReference(RunSetup{GetParam()}); }
TEST_P(SchemeTest, AdamInGradientModeEqualsReference) { expectEqualsReference(RunSetup{GetParam(), true}); }
TEST_P(SchemeTest, TwoBackwardPassesPerStepEqualReference) { expectEqualsReference(RunSetup{GetParam(), false, 2}); }
INSTANTIATE_TEST_SUITE_P(Schemes, SchemeTest, ::testing::Values("ps", "sfb", "allreduce", "auto"));

TEST(TorchGeneral, AveragedBuffersEqualReference) {
  expectEqualsReference(RunSetup{"auto", false, 1, "average"});
  expectEqualsReference(RunSetup{"sfb", true, 2, "average", 3});
}

TEST(TorchGeneral, FindsLayersByPathAndLinearThroughPoseidonIsFactorable) {
  torch::set_num_threads(1);
  ResidualNet net;
  LoopbackHub hub(1);
  auto x = torch::randn({kBatch, 1, 6, 6});
  Options o;
  o.batch = kBatch;
  TorchModel model(hub.transport(0), net, "residual", o, [&] { net->forward(x); });
  const auto& layers = model.info().layers;
  std::vector<std::string> names;
  for (const auto& l : layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1", "bn1", "conv2", "bn2", "fc1", "fc2"}));
  EXPECT_EQ(layers[0].kind, LayerKind::kConv);
  EXPECT_EQ(layers[1].kind, LayerKind::kOther);
  EXPECT_EQ(layers[4].kind, LayerKind::kFC);
  EXPECT_TRUE(layers[4].factorable);   // called through poseidon::linear
  EXPECT_FALSE(layers[5].factorable);  // called directly: never SFB
  model.finish();
}

// A token model: Embedding [B, T] -> Linear on [B, T, E] -> mean over T -> Linear.
struct TokenNetImpl : torch::nn::Module {
  TokenNetImpl()
      : embed(register_module("embed", torch::nn::Embedding(20, 8))),
        proj(register_module("proj", torch::nn::Linear(8, 16))),
        head(register_module("head", torch::nn::Linear(16, 3))) {}
  torch::Tensor forward(torch::Tensor tokens) {
    auto h = torch::relu(poseidon::linear(proj, embed(tokens)));  // [B, T, 16]
    return poseidon::linear(head, h.mean(1));
  }
  torch::nn::Embedding embed;
  torch::nn::Linear proj, head;
};
TORCH_MODULE(TokenNet);

std::vector<torch::Tensor> trainTokens(const std::string& scheme, int ranks, std::int64_t* rows_seen) {
  constexpr int T = 5;
  torch::manual_seed(3);
  const auto tokens = torch::randint(0, 20, {kIterations, ranks * kBatch, T});
  const auto labels = torch::randint(0, 3, {kIterations, ranks * kBatch});
  std::vector<std::vector<torch::Tensor>> finals(ranks);
  auto nets = seededPerRank<TokenNet>(ranks, 1, 50);
  testing::runRanks(ranks, [&](Transport& t, int rank) {
    auto net = nets[rank];
    const Options o = smallRunOptions(scheme);
    const auto mine = [&](int it) { return tokens[it].narrow(0, rank * kBatch, kBatch); };
    TorchModel model(t, net, "tokens", o, [&] { net->forward(mine(0)); });
    if (rank == 0) *rows_seen = model.info().layers[1].rows_per_example;
    if (scheme == "sfb") EXPECT_TRUE(usesFactors(model.session().plan()[1].scheme));
    for (int it = 0; it < kIterations; ++it) {
      auto y = labels[it].narrow(0, rank * kBatch, kBatch);
      torch::nn::functional::cross_entropy(model.forward([&] { return net->forward(mine(it)); }), y).backward();
      model.step();
    }
    model.synchronize();
    finals[rank] = stateOf(*net);
    model.finish();
  });
  return finals[0];
}

TEST(TorchGeneral, LinearOnThreeDimensionalInputIsExactUnderEveryScheme) {
  torch::set_num_threads(1);
  for (int ranks : {2, 3}) {
    std::int64_t rows = 0;
    const auto ps = trainTokens("ps", ranks, &rows);
    EXPECT_EQ(rows, 5) << "the planner's K per example for proj";
    EXPECT_GT(relativeDifference(ps, stateOf(*seeded<TokenNet>(1))), 1e-3);
    EXPECT_LE(relativeDifference(ps, trainTokens("sfb", ranks, &rows)), 1e-6) << ranks << " ranks";
    EXPECT_LE(relativeDifference(ps, trainTokens("auto", ranks, &rows)), 1e-6) << ranks << " ranks";
  }
}

TEST(TorchGeneral, FrozenParametersStayAndTheRestTrains) {
  torch::set_num_threads(1);
  const Data d = makeData(2);
  std::vector<torch::Tensor> frozen_after(2), trained_after(2);
  auto init = seeded<ResidualNet>(1);
  auto nets = seededPerRank<ResidualNet>(2, 1, 9);  // rank 0's frozen values are everyone's
  testing::runRanks(2, [&](Transport& t, int rank) {
    auto net = nets[rank];
    net->conv1->weight.set_requires_grad(false);
    Options o = optionsFor(RunSetup{"sfb"});
    TorchModel model(t, net, "frozen", o);
    EXPECT_NE(model.info().layers[0].name, "conv1");  // conv1 trains nothing: not a layer
    for (int it = 0; it < 5; ++it) {
      auto [x, y] = slice(d, it, rank, 0, 1);
      torch::nn::functional::cross_entropy(model.forward([&] { return net->forward(x); }), y).backward();
      model.step();
    }
    model.synchronize();
    frozen_after[rank] = net->conv1->weight.detach().clone();
    trained_after[rank] = net->conv2->weight.detach().clone();
    model.finish();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(frozen_after[r], init->conv1->weight));
    EXPECT_FALSE(torch::equal(trained_after[r], init->conv2->weight));
  }
}

// A module with a layer that takes part in the loss only on even iterations.
struct SometimesNetImpl : torch::nn::Module {
  SometimesNetImpl()
      : a(register_module("a", torch::nn::Linear(6, 6))),
        b(register_module("b", torch::nn::Linear(6, 3))),
        extra(register_module("extra", torch::nn::Linear(6, 6))) {}
  torch::Tensor forward(torch::Tensor x, bool use_extra) {
    auto h = torch::relu(poseidon::linear(a, x));
    if (use_extra) h = h + poseidon::linear(extra, h);
    return poseidon::linear(b, h);
  }
  torch::nn::Linear a, b, extra;
};
TORCH_MODULE(SometimesNet);

TEST(TorchGeneral, LayerNoRankUsedIsSkippedAtOnce) {
  torch::set_num_threads(1);
  for (const char* scheme : {"ps", "sfb", "allreduce"}) {
    torch::manual_seed(5);
    const auto xs = torch::randn({6, 2 * kBatch, 6});
    const auto ys = torch::randint(0, 3, {6, 2 * kBatch});
    // Reference: one replica, mean gradient of both halves, plain SGD.
    torch::manual_seed(1);
    SometimesNet ref;
    torch::optim::SGD sgd(ref->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int it = 0; it < 6; ++it) {
      sgd.zero_grad();  // set to none: a layer unused this iteration has no gradient, and SGD skips it
      for (int r = 0; r < 2; ++r) {
        auto x = xs[it].narrow(0, r * kBatch, kBatch), y = ys[it].narrow(0, r * kBatch, kBatch);
        torch::nn::functional::cross_entropy(ref->forward(x, it % 2 == 0), y).backward();
      }
      for (auto& p : ref->parameters()) {
        if (p.grad().defined()) p.mutable_grad().div_(2);
      }
      sgd.step();
    }
    std::vector<std::vector<torch::Tensor>> finals(2);
    const auto start = std::chrono::steady_clock::now();
    auto nets = seededPerRank<SometimesNet>(2, 1, 1);
    testing::runRanks(2, [&](Transport& t, int rank) {
      auto net = nets[rank];
      const Options o = smallRunOptions(scheme);
      TorchModel model(t, net, "sometimes", o, [&] { net->forward(xs[0].narrow(0, 0, kBatch), true); });
      for (int it = 0; it < 6; ++it) {
        auto x = xs[it].narrow(0, rank * kBatch, kBatch), y = ys[it].narrow(0, rank * kBatch, kBatch);
        torch::nn::functional::cross_entropy(model.forward([&] { return net->forward(x, it % 2 == 0); }), y).backward();
        model.step();
      }
      model.synchronize();
      finals[rank] = stateOf(*net);
      model.finish();
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << scheme;
    // No rank uses `extra` on odd iterations: its .grad stays undefined in the reference and
    // SGD leaves it (momentum included), as DDP's find_unused_parameters rule has it; every
    // scheme's step skips it, at once (no wait for a gradient that never comes).
    EXPECT_LE(relativeDifference(finals[0], finals[1]), 0.0) << scheme;
    EXPECT_LE(relativeDifference(stateOf(*ref), finals[0]), 1e-5) << scheme;
  }
}

TEST(TorchGeneral, SequentialKeepsItsNamesAndPerLayerWaits) {
  torch::set_num_threads(1);
  torch::nn::Sequential net(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 2));
  LoopbackHub hub(1);
  TorchModel model(hub.transport(0), net, "seq", Options{});
  ASSERT_EQ(model.info().layers.size(), 2u);
  EXPECT_EQ(model.info().layers[0].name, "fc0");
  EXPECT_EQ(model.info().layers[1].name, "fc2");
  auto loss = model.forward(torch::randn({3, 4})).sum();
  loss.backward();
  model.step();
  model.finish();
}

TEST(TorchGeneral, BadUseGetsClearErrors) {
  torch::set_num_threads(1);
  LoopbackHub hub(1);
  struct EmptyImpl : torch::nn::Module {};
  auto empty = std::make_shared<EmptyImpl>();
  EXPECT_THROW(TorchModel(hub.transport(0), std::static_pointer_cast<torch::nn::Module>(empty), "empty", Options{}),
               InputError);
  ResidualNet net;
  TorchModel model(hub.transport(0), net, "r", Options{});
  EXPECT_THROW(model.forward(torch::randn({2, 1, 6, 6})), InputError);  // not a Sequential
  EXPECT_THROW(model.step(), Error);                                    // no forward pass
  model.finish();
}

// One Linear called twice per pass (a shared cell) and one module registered twice.
struct SharedNetImpl : torch::nn::Module {
  SharedNetImpl()
      : cell(register_module("cell", torch::nn::Linear(6, 6))), head(register_module("head", torch::nn::Linear(6, 3))) {
    register_module("cell_again", cell);  // tied: one layer, one sync
  }
  torch::Tensor forward(torch::Tensor x) {
    auto h = torch::relu(poseidon::linear(cell, x));
    return poseidon::linear(head, torch::relu(poseidon::linear(cell, h)));
  }
  torch::nn::Linear cell, head;
};
TORCH_MODULE(SharedNet);

std::vector<torch::Tensor> trainShared(const std::string& scheme) {
  torch::manual_seed(4);
  const auto xs = torch::randn({kIterations, 2 * kBatch, 6});
  const auto ys = torch::randint(0, 3, {kIterations, 2 * kBatch});
  std::vector<std::vector<torch::Tensor>> finals(2);
  auto nets = seededPerRank<SharedNet>(2, 1, 20);
  testing::runRanks(2, [&](Transport& t, int rank) {
    auto net = nets[rank];
    const Options o = smallRunOptions(scheme);
    const auto mine = [&](const torch::Tensor& all, int it) { return all[it].narrow(0, rank * kBatch, kBatch); };
    TorchModel model(t, net, "shared", o, [&] { net->forward(mine(xs, 0)); });
    EXPECT_EQ(model.info().layers.size(), 2u);
    if (scheme == "sfb") EXPECT_TRUE(usesFactors(model.session().plan()[0].scheme));
    for (int it = 0; it < kIterations; ++it) {
      auto out = model.forward([&] { return net->forward(mine(xs, it)); });
      torch::nn::functional::cross_entropy(out, mine(ys, it)).backward();
      model.step();
    }
    model.synchronize();
    finals[rank] = stateOf(*net);
    model.finish();
  });
  return finals[0];
}

TEST(TorchGeneral, LinearCalledTwicePerPassIsExactBySfb) {
  torch::set_num_threads(1);
  const auto ps = trainShared("ps");
  EXPECT_GT(relativeDifference(ps, stateOf(*seeded<SharedNet>(1))), 1e-3);
  EXPECT_LE(relativeDifference(ps, trainShared("sfb")), 1e-6);
}

TEST(TorchGeneral, EvalForwardWithGradientsIsNotATrainingPass) {
  torch::set_num_threads(1);
  torch::nn::Sequential net(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 2));
  LoopbackHub hub(1);
  TorchModel model(hub.transport(0), net, "seq", Options{});
  net->eval();
  model.forward(torch::randn({3, 4}));  // a metric without NoGradGuard, as before
  model.forward(torch::randn({3, 4}));
  net->train();
  model.forward(torch::randn({3, 4})).sum().backward();
  model.step();
  // A Sequential in the any-module form would skip its per-child waits and factor capture.
  EXPECT_THROW(model.forward([&] { return net->forward(torch::randn({3, 4})); }), InputError);
  model.finish();
}

}  // namespace
}  // namespace poseidon
