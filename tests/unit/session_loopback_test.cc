// Distributed training over the loopback transport, threads as ranks, against a
// single-process reference, on the engine-free toy model (tests/support/toy_training.h).
#include "poseidon/session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "comm/gradient16.h"
#include "common/digest.h"
#include "poseidon/errors.h"
#include "update/sgd.h"
#include "test_ranks.h"
#include "toy_training.h"

namespace poseidon {
namespace {

struct Config {
  int ranks;
  bool wfbp;
  int server_ranks = 0;
  int shards = 0;
  std::int64_t pair_bytes = 512;  // small pairs: every layer is cut into several
  bool replicas_equal = false;    // every rank starts from rank 0's values, told so
  std::string wire = "fp32";      // 16 bits: the reference rounds each gradient as the wire does
  bool error_feedback = false;    // and carries each rounding's residual to the next
};

constexpr int kIterations = 6;

void trainAndCompare(const Config& c) {
  const ModelInfo model = toy::model();
  Options o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  o.wfbp = c.wfbp;
  o.server_ranks = c.server_ranks;
  o.shards = c.shards;
  o.kv_pair_bytes = c.pair_bytes;
  o.replicas_equal = c.replicas_equal;
  o.scheme = "ps";
  o.wire = c.wire;
  o.error_feedback = c.error_feedback;
  o.timeout = std::chrono::milliseconds(20000);
  const int workers = c.ranks - c.server_ranks;
  const auto want = toy::reference(model, workers, o, kIterations);
  if (c.wire != "fp32") {  // the rounding shows: the exact run ends elsewhere
    Options exact = o;
    exact.wire = "fp32";
    exact.error_feedback = false;
    EXPECT_NE(toy::reference(model, workers, exact, kIterations), want);
  }
  if (c.error_feedback) {  // and so does the feedback
    Options plain = o;
    plain.error_feedback = false;
    EXPECT_NE(toy::reference(model, workers, plain, kIterations), want);
  }

  std::vector<std::string> digests(c.ranks);  // of the replicated state, by rank (--verify's)
  testing::runRanks(c.ranks, [&](Transport& transport, int rank) {
    toy::Replica r = toy::makeReplica(model, c.replicas_equal ? 0 : rank);
    Session session(transport, model, r.pointers(), o);
    if (!session.layout().worker) {
      session.serveUntil(kIterations);
      session.finish();
      return;
    }
    toy::train(session, r, rank, kIterations);
    session.waitAll();  // the last iteration's values are in
    digests[rank] = session.replicaDigest();
    session.finish();
    if (c.wire != "fp32") {  // the digest is of this worker's own PS values
      Digest mine;
      for (const auto& layer : r.params) {
        for (const auto& tensor : layer) mine.update(tensor.data(), tensor.size() * sizeof(float));
      }
      EXPECT_EQ(digests[rank], mine.hex()) << "rank " << rank;
    }
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      for (std::size_t t = 0; t < r.params[l].size(); ++t) {
        for (std::size_t i = 0; i < r.params[l][t].size(); ++i) {
          ASSERT_NEAR(r.params[l][t][i], want[l][t][i], 1e-5 * (1 + std::fabs(want[l][t][i])))
              << "rank " << rank << " layer " << l << " tensor " << t << " index " << i;
        }
        // The session also clears each gradient once its sync is done.
        for (float g : r.grads[l][t]) ASSERT_EQ(g, 0.0f);
      }
    }
  });
  // A 16-bit wire's updates are added by each worker to its own copy: the digest covers
  // them (and is equal everywhere); fp32 values are the servers' copies, outside it.
  const std::string first = digests[0];  // workers are the first ranks
  for (int rank = 1; rank < workers; ++rank) EXPECT_EQ(digests[rank], first) << "rank " << rank;
  EXPECT_EQ(first == Digest().hex(), c.wire == "fp32") << first;
}

TEST(SessionLoopback, OneWorkerMatchesReference) { trainAndCompare({1, true}); }
TEST(SessionLoopback, TwoWorkersWfbp) { trainAndCompare({2, true}); }
TEST(SessionLoopback, FourWorkersWfbp) { trainAndCompare({4, true}); }
TEST(SessionLoopback, FourWorkersWithoutWfbp) { trainAndCompare({4, false}); }
TEST(SessionLoopback, ServerOnlyRank) { trainAndCompare({3, true, 1, 0}); }
TEST(SessionLoopback, FewerShardsThanRanks) { trainAndCompare({4, true, 0, 2}); }
TEST(SessionLoopback, LargePairsOneShardPerLayer) { trainAndCompare({3, true, 0, 0, 1 << 20}); }

// No broadcast: the start compares digests, and trains as after one.
// 16-bit pushes (issue 38): every worker's gradient, its own shard's pairs included, is
// rounded as the wire rounds it and the rest stays fp32, so the run equals a reference
// that rounds the same way. fp16's scale is per pair: one pair per tensor makes it the
// reference's per-tensor scale.
TEST(SessionLoopback, Bf16PushesMatchTheRoundedReference) { trainAndCompare({3, true, 0, 0, 512, false, "bf16"}); }
TEST(SessionLoopback, Bf16PushesFromAWorkerWithoutAShard) { trainAndCompare({3, true, 1, 0, 512, false, "bf16"}); }
TEST(SessionLoopback, Fp16PushesMatchTheRoundedReference) { trainAndCompare({3, true, 0, 0, 1 << 20, false, "fp16"}); }
// Error feedback: each worker's residual per pair, each shard's per update, as the reference.
TEST(SessionLoopback, Bf16WithErrorFeedbackMatchesTheReference) {
  trainAndCompare({3, true, 0, 0, 512, false, "bf16", true});
}
TEST(SessionLoopback, Fp16WithErrorFeedbackFromAWorkerWithoutAShard) {
  trainAndCompare({3, true, 1, 0, 1 << 20, false, "fp16", true});
}
TEST(SessionLoopback, Fp16WithErrorFeedbackOnEveryShard) {
  trainAndCompare({3, true, 0, 0, 1 << 20, false, "fp16", true});
}
// Gradient mode on a 16-bit wire: the shards send the mean gradient back in 16 bits
// (kMeanGrad16). Every worker reads the one rounding of the shard's fp32 mean, bit for bit
// what a reference that rounds pushes and means alike computes (with error feedback, its
// residuals too), and its own optimizer (here plain SGD) keeps the replicas equal.
void localStep(std::vector<float>& v, const std::vector<float>& mean) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] -= 0.05f * mean[i];
}

using Tensors = std::vector<std::vector<std::vector<float>>>;  // [layer][tensor][value]

// Each iteration's mean gradients, by layer and tensor, as the wire rounds them.
std::vector<Tensors> referenceMeans(const ModelInfo& model, int workers, const Options& o, int iterations) {
  const WireFormat wire = parseWireFormat(o.wire);
  toy::Replica r = toy::makeReplica(model, 0);
  std::vector<Tensors> pushed(workers, r.grads);  // error feedback's residuals, by worker
  Tensors returned = r.grads;
  std::vector<Tensors> means;
  for (int it = 0; it < iterations; ++it) {
    Tensors mean = r.grads;
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      for (std::size_t t = 0; t < r.params[l].size(); ++t) {
        auto& v = r.params[l][t];
        std::vector<std::vector<float>> g(workers, std::vector<float>(v.size()));
        std::vector<const float*> ptrs;
        for (int w = 0; w < workers; ++w) {
          for (std::size_t i = 0; i < v.size(); ++i) g[w][i] = v[i] - toy::target(w, r.base[l][t] + i);
          toy::roundWithFeedback(wire, o.error_feedback, g[w], pushed[w][l][t]);
          ptrs.push_back(g[w].data());
        }
        std::vector<float>& m = mean[l][t];
        SgdOptions gradient_only;
        gradient_only.gradient_only = true;
        sgdStep(m.data(), nullptr, ptrs, 1.0f / workers, static_cast<std::int64_t>(m.size()), gradient_only, it == 0);
        toy::roundWithFeedback(wire, o.error_feedback, m, returned[l][t]);
        localStep(v, m);
      }
    }
    means.push_back(mean);
  }
  return means;
}

void meanGradientsOnTheWire(const std::string& wire, bool feedback, int server_ranks) {
  const ModelInfo model = toy::model();
  Options o;
  o.gradient_mode = true;
  o.scheme = "ps";
  o.wire = wire;
  o.error_feedback = feedback;
  o.server_ranks = server_ranks;
  o.kv_pair_bytes = 1 << 20;  // one pair per tensor: fp16's scale is the reference's
  o.timeout = std::chrono::milliseconds(20000);
  const int ranks = 3, workers = ranks - server_ranks;
  const std::vector<Tensors> want = referenceMeans(model, workers, o, kIterations);
  Options exact = o;
  exact.wire = "fp32";
  exact.error_feedback = false;
  EXPECT_NE(referenceMeans(model, workers, exact, kIterations), want);  // the rounding shows
  testing::runRanks(ranks, [&](Transport& transport, int rank) {
    toy::Replica r = toy::makeReplica(model, rank);
    Session session(transport, model, r.pointers(), o);
    if (!session.layout().worker) {
      session.serveUntil(kIterations);
      session.finish();
      return;
    }
    for (int it = 0; it < kIterations; ++it) {
      for (int l = static_cast<int>(model.layers.size()) - 1; l >= 0; --l) {
        std::vector<float*> g;
        for (std::size_t t = 0; t < r.params[l].size(); ++t) {
          for (std::size_t i = 0; i < r.params[l][t].size(); ++i) {
            r.grads[l][t][i] = r.params[l][t][i] - toy::target(rank, r.base[l][t] + i);
          }
          g.push_back(r.grads[l][t].data());
        }
        session.gradientsReady(l, g);
      }
      session.endIteration();
      session.waitAll();  // the mean gradients are in
      EXPECT_EQ(r.grads, want[it]) << "rank " << rank << " iteration " << it;  // EXPECT: the others go on
      for (std::size_t l = 0; l < model.layers.size(); ++l) {
        for (std::size_t t = 0; t < r.params[l].size(); ++t) localStep(r.params[l][t], r.grads[l][t]);
      }
    }
    session.finish();
  });
}

TEST(SessionLoopback, Bf16MeanGradientsInGradientMode) { meanGradientsOnTheWire("bf16", false, 0); }
TEST(SessionLoopback, Fp16MeanGradientsWithErrorFeedbackAndAServerOnlyRank) {
  meanGradientsOnTheWire("fp16", true, 1);
}

TEST(SessionLoopback, ReplicasAlreadyEqual) { trainAndCompare({3, true, 0, 0, 512, true}); }

TEST(SessionLoopback, ReplicasSaidEqualThatDifferFailAtStartup) {
  EXPECT_THROW(testing::runRanks(2,
                                 [](Transport& transport, int rank) {
                                   const ModelInfo model = toy::model();
                                   toy::Replica r = toy::makeReplica(model, rank);  // rank 1's differ
                                   Options o;
                                   o.scheme = "ps";
                                   o.replicas_equal = true;
                                   o.timeout = std::chrono::milliseconds(5000);
                                   Session session(transport, model, r.pointers(), o);
                                 }),
               Error);
}

TEST(SessionLoopback, RanksThatDisagreeFailAtStartup) {
  EXPECT_THROW(testing::runRanks(2,
                                 [](Transport& transport, int rank) {
                                   ModelInfo model = toy::model();
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

// An allreduce has no message of its own to miss: a rank whose loop stops after 2
// iterations (alive: its transport answers) is named by the others' timeout as behind, with
// the iterations each has ended (client/progress_probe.h, wired into the session).
TEST(SessionLoopback, AllreduceTimeoutNamesTheRankBehind) {
  const ModelInfo model = toy::model();
  Options o;
  o.scheme = "allreduce";
  o.lr = 0.05f;
  o.timeout = std::chrono::milliseconds(1500);
  std::mutex mu;
  std::condition_variable cv;
  int explained = 0;
  std::vector<std::string> errors(3);
  testing::runRanks(3, [&](Transport& transport, int rank) {
    toy::Replica r = toy::makeReplica(model, rank);
    Session session(transport, model, r.pointers(), o);
    std::vector<std::vector<float*>> grads(model.layers.size());
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      for (auto& g : r.grads[l]) grads[l].push_back(g.data());
    }
    const int iterations = rank == 1 ? 2 : 4;
    try {
      for (int it = 0; it < iterations; ++it) {
        for (int l = static_cast<int>(model.layers.size()) - 1; l >= 0; --l) session.gradientsReady(l, grads[l]);
        session.endIteration();
        session.waitAll();
      }
    } catch (const TimeoutError& e) {
      errors[rank] = e.what();
    }
    // Rank 1 stays (its transport answering) until the others have their explanation.
    std::unique_lock<std::mutex> lock(mu);
    if (rank != 1) ++explained;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return explained == 2; });
  });
  EXPECT_EQ(errors[1], "");
  for (int rank : {0, 2}) {
    EXPECT_NE(errors[rank].find("; rank 1 has ended 2 iterations, this rank 3: stalled in its training loop"),
              std::string::npos)
        << "rank " << rank << ": " << errors[rank];
  }
}

}  // namespace
}  // namespace poseidon
