// Distributed training over the loopback transport, threads as ranks, against a
// single-process reference. The "model" is engine-free: each worker's gradient is
// p - target(worker), a quadratic loss whose mean gradient the reference computes.
#include "poseidon/session.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kvstore/sgd.h"
#include "poseidon/errors.h"
#include "test_ranks.h"

namespace poseidon {
namespace {

ModelInfo toyModel() {
  ModelInfo m;
  m.name = "toy";
  m.layers.push_back(LayerInfo{"conv0", LayerKind::kConv, {{"weight", {8, 3, 3, 3}}, {"bias", {8}}}, 0, 0});
  m.layers.push_back(LayerInfo{"fc1", LayerKind::kFC, {{"weight", {40, 50}}, {"bias", {40}}}, 40, 50});
  m.layers.push_back(LayerInfo{"fc2", LayerKind::kFC, {{"weight", {3, 40}}, {"bias", {3}}}, 3, 40});
  return m;
}

float initial(std::size_t flat) { return std::sin(0.37f * static_cast<float>(flat)); }
float target(int worker, std::size_t flat) { return 0.1f * worker + std::cos(0.11f * static_cast<float>(flat)); }

struct Config {
  int ranks;
  bool wfbp;
  int server_ranks = 0;
  int shards = 0;
  std::int64_t pair_bytes = 512;  // small pairs: every layer is cut into several
};

constexpr int kIterations = 6;

// params[l][t] as flat vectors, trained by the reference: mean gradient, then SGD.
std::vector<std::vector<std::vector<float>>> reference(const ModelInfo& m, int workers, const Options& o) {
  std::vector<std::vector<std::vector<float>>> p(m.layers.size()), buf(m.layers.size());
  std::size_t flat = 0;
  std::vector<std::vector<std::size_t>> base(m.layers.size());
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    for (const auto& t : m.layers[l].tensors) {
      base[l].push_back(flat);
      std::vector<float> v(t.numel());
      for (auto& x : v) x = initial(flat++);
      p[l].push_back(v);
      buf[l].push_back(std::vector<float>(v.size()));
    }
  }
  for (int it = 0; it < kIterations; ++it) {
    for (std::size_t l = 0; l < m.layers.size(); ++l) {
      for (std::size_t t = 0; t < p[l].size(); ++t) {
        auto& v = p[l][t];
        std::vector<std::vector<float>> g(workers, std::vector<float>(v.size()));
        std::vector<const float*> ptrs;
        for (int w = 0; w < workers; ++w) {
          for (std::size_t i = 0; i < v.size(); ++i) g[w][i] = v[i] - target(w, base[l][t] + i);
          ptrs.push_back(g[w].data());
        }
        sgdStep(v.data(), buf[l][t].data(), ptrs, 1.0f / workers, static_cast<std::int64_t>(v.size()),
                SgdOptions{o.lr, o.momentum, o.weight_decay}, it == 0);
      }
    }
  }
  return p;
}

void trainAndCompare(const Config& c) {
  const ModelInfo model = toyModel();
  Options o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  o.wfbp = c.wfbp;
  o.server_ranks = c.server_ranks;
  o.shards = c.shards;
  o.kv_pair_bytes = c.pair_bytes;
  o.scheme = "ps";
  o.timeout = std::chrono::milliseconds(20000);
  const int workers = c.ranks - c.server_ranks;
  const auto want = reference(model, workers, o);

  testing::runRanks(c.ranks, [&](Transport& transport, int rank) {
    std::vector<std::vector<std::vector<float>>> params(model.layers.size()), grads(model.layers.size());
    std::vector<std::vector<float*>> ptrs(model.layers.size());
    std::vector<std::vector<std::size_t>> base(model.layers.size());
    std::size_t flat = 0;
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      for (const auto& t : model.layers[l].tensors) {
        base[l].push_back(flat);
        std::vector<float> v(t.numel());
        // Only rank 0's values count: the session broadcasts them.
        for (auto& x : v) x = rank == 0 ? initial(flat) : 1e6f, ++flat;
        params[l].push_back(v);
        grads[l].push_back(std::vector<float>(v.size()));
      }
    }
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      for (auto& v : params[l]) ptrs[l].push_back(v.data());
    }
    Session session(transport, model, ptrs, o);
    if (!session.isWorker()) {
      session.serveUntil(kIterations);
      session.finish();
      return;
    }
    for (int it = 0; it < kIterations; ++it) {
      // "Backward", top layer first, each layer reported as soon as its gradient exists.
      for (int l = static_cast<int>(model.layers.size()) - 1; l >= 0; --l) {
        session.waitLayer(l);  // the forward pass would have waited here
        std::vector<float*> g;
        for (std::size_t t = 0; t < params[l].size(); ++t) {
          for (std::size_t i = 0; i < params[l][t].size(); ++i) {
            grads[l][t][i] = params[l][t][i] - target(rank, base[l][t] + i);
          }
          g.push_back(grads[l][t].data());
        }
        session.gradientsReady(l, g);
      }
      session.endIteration();
    }
    session.finish();
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      for (std::size_t t = 0; t < params[l].size(); ++t) {
        for (std::size_t i = 0; i < params[l][t].size(); ++i) {
          ASSERT_NEAR(params[l][t][i], want[l][t][i], 1e-5 * (1 + std::fabs(want[l][t][i])))
              << "rank " << rank << " layer " << l << " tensor " << t << " index " << i;
        }
        // The session also clears each gradient once its sync is done.
        for (float g : grads[l][t]) ASSERT_EQ(g, 0.0f);
      }
    }
  });
}

TEST(SessionLoopback, OneWorkerMatchesReference) { trainAndCompare({1, true}); }
TEST(SessionLoopback, TwoWorkersWfbp) { trainAndCompare({2, true}); }
TEST(SessionLoopback, FourWorkersWfbp) { trainAndCompare({4, true}); }
TEST(SessionLoopback, FourWorkersWithoutWfbp) { trainAndCompare({4, false}); }
TEST(SessionLoopback, ServerOnlyRank) { trainAndCompare({3, true, 1, 0}); }
TEST(SessionLoopback, FewerShardsThanRanks) { trainAndCompare({4, true, 0, 2}); }
TEST(SessionLoopback, LargePairsOneShardPerLayer) { trainAndCompare({3, true, 0, 0, 1 << 20}); }

TEST(SessionLoopback, RanksThatDisagreeFailAtStartup) {
  EXPECT_THROW(testing::runRanks(2,
                                 [](Transport& transport, int rank) {
                                   ModelInfo model = toyModel();
                                   if (rank == 1) model.layers[1].tensors[0].shape = {41, 50};
                                   std::vector<std::vector<float>> store;
                                   std::vector<std::vector<float*>> ptrs(model.layers.size());
                                   for (std::size_t l = 0; l < model.layers.size(); ++l) {
                                     for (const auto& t : model.layers[l].tensors) {
                                       store.emplace_back(t.numel());
                                       ptrs[l].push_back(store.back().data());
                                     }
                                   }
                                   Options o;
                                   o.scheme = "ps";
                                   o.timeout = std::chrono::milliseconds(5000);
                                   Session session(transport, model, ptrs, o);
                                 }),
               InputError);
}

}  // namespace
}  // namespace poseidon
