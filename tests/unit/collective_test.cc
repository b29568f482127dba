// The KVStore designs over the loopback communicators (threads as ranks), tensor fusion,
// and the planner's allreduce choice. The loopback communicator fails loudly when ranks
// call collectives in different orders, which is how MPI would deadlock.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "allreduce/communicator.h"
#include "allreduce/communicators.h"
#include "allreduce/fusion.h"
#include "allreduce/kvstore.h"
#include "allreduce/ring_order.h"
#include "allreduce/sum16.h"
#include "comm/gradient16.h"
#include "comm/loopback_transport.h"
#include "coordinator/scheme_planner.h"
#include "kvstore_stress.h"
#include "poseidon/errors.h"

#ifndef POSEIDON_STRESS_ITERATIONS
#define POSEIDON_STRESS_ITERATIONS 20
#endif

namespace poseidon {
namespace {

void stress(KVStoreType type, int ranks, int comms, int outstanding) {
  LoopbackHub hub(ranks);
  std::vector<StressResult> results(ranks);
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        KVStoreOptions o{type, comms, outstanding, std::chrono::seconds(30)};
        results[r] = runKVStoreStress(hub.transport(r), o, POSEIDON_STRESS_ITERATIONS, 7);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (errors[r]) std::rethrow_exception(errors[r]);
    EXPECT_EQ(results[r].wrong_values, 0) << "rank " << r;
    EXPECT_EQ(results[r].collectives, 8 * POSEIDON_STRESS_ITERATIONS);
  }
}

TEST(KVStoreDesigns, FunnelSumsCorrectlyWhateverOrderGradientsArriveIn) { stress(KVStoreType::kFunnel, 3, 1, 1); }
TEST(KVStoreDesigns, ConcurrentSumsCorrectlyWhateverOrderGradientsArriveIn) {
  stress(KVStoreType::kConcurrent, 3, 3, 3);
}
TEST(KVStoreDesigns, ChainedSumsCorrectlyWhateverOrderGradientsArriveIn) { stress(KVStoreType::kChained, 3, 1, 1); }

// A group's communicator (the node leaders' allreduce): only its members call, ranked in
// the group's order, and the others' collectives do not meet theirs.
TEST(GroupCommunicator, OnlyTheMembersMeet) {
  LoopbackHub hub(4);
  std::vector<std::thread> threads;
  std::vector<float> sums(4, 0.0f);
  std::vector<int> ranks(4, -1);
  FailureState failure;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      const std::vector<int> group = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
      auto comm = newGroupCommunicator(hub.transport(r), group, std::chrono::seconds(10), failure);
      const float mine = static_cast<float>(r + 1);
      comm->allreduceSum(&mine, &sums[r], 1);
      ranks[r] = comm->rank();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, (std::vector<float>{4, 6, 4, 6}));  // 1 + 3 and 2 + 4
  EXPECT_EQ(ranks, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_THROW(newGroupCommunicator(hub.transport(0), {1, 2}, std::chrono::seconds(1), failure), CommError);
}

// The fp32 sums' order (ring_order.h): slice s from rank s+1's value around to rank s's,
// here where the order shows: 2^24 + 1 rounds back to 2^24. Rank order would give 0 in
// every slice; the ring's gives (1 - 2^24) + 2^24 = 1 in slice 0, (-2^24 + 2^24) + 1 = 1 in
// slice 1 and (2^24 + 1) - 2^24 = 0 in slice 2. Every rank gets the same.
TEST(RingOrder, SumsAddFromTheOwnersRightNeighbourAroundTheRing) {
  constexpr int P = 3;
  const float value[P] = {16777216.0f, 1.0f, -16777216.0f};
  LoopbackHub hub(P);
  FailureState failure;
  std::vector<std::vector<float>> got(P, std::vector<float>(P));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      auto comm = newCommunicator(hub.transport(r), std::chrono::seconds(10), failure);
      const std::vector<float> mine(P, value[r]);
      comm->allreduceSum(mine.data(), got[r].data(), P);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < P; ++r) EXPECT_EQ(got[r], (std::vector<float>{1, 1, 0})) << "rank " << r;
  for (std::size_t count : {1u, 2u, 3u, 7u, 10u, 1001u}) {
    for (int parts : {2, 3, 4}) {
      const sum16::Slices slices(count, parts);
      for (std::size_t i = 0; i < count; ++i) {
        const int s = sliceOf(i, count, parts);
        EXPECT_TRUE(slices.begin(s) <= i && i < slices.begin(s) + slices.length(s)) << count << " " << parts << " " << i;
      }
    }
  }
}

// The 16-bit allreduce (sum16.h): per slice, each rank's values rounded alone, added in
// fp32 in rank order starting from rank 0's, the sum rounded again.
std::vector<float> sum16Reference(WireFormat format, const std::vector<std::vector<float>>& send, std::size_t n) {
  const std::size_t P = send.size();
  std::vector<float> out(n);
  for (std::size_t s = 0; s < P; ++s) {
    const std::size_t b = n * s / P, e = n * (s + 1) / P;
    std::vector<float> sum(e - b), rounded(e - b);
    for (std::size_t r = 0; r < P; ++r) {
      roundThrough(format, send[r].data() + b, rounded.data(), e - b);
      for (std::size_t i = 0; i < e - b; ++i) sum[i] = r == 0 ? rounded[i] : sum[i] + rounded[i];
    }
    roundThrough(format, sum.data(), out.data() + b, e - b);
  }
  return out;
}

TEST(Sum16, EveryRankGetsTheRoundedSlicesRoundedSumBitForBit) {
  constexpr int P = 3;
  for (const WireFormat format : {WireFormat::kBf16, WireFormat::kFp16}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{10001}}) {
      std::vector<std::vector<float>> send(P, std::vector<float>(n));
      for (int r = 0; r < P; ++r) {
        // Magnitudes from 1e-3 to 1e3, so fp16's per-slice scale matters.
        for (std::size_t i = 0; i < n; ++i) send[r][i] = std::sin(0.37f * i + r) * std::pow(10.0f, float(i % 7) - 3);
      }
      LoopbackHub hub(P);
      FailureState failure;
      std::vector<std::vector<float>> got(P);
      std::vector<std::thread> threads;
      for (int r = 0; r < P; ++r) {
        threads.emplace_back([&, r] {
          auto comm = newCommunicator(hub.transport(r), std::chrono::seconds(10), failure);
          got[r] = send[r];
          comm->allreduceSum16(format, got[r].data(), got[r].data(), n, nullptr);  // in place
        });
      }
      for (auto& t : threads) t.join();
      const auto want = sum16Reference(format, send, n);
      for (int r = 0; r < P; ++r) {
        ASSERT_EQ(std::memcmp(got[r].data(), want.data(), n * sizeof(float)), 0)
            << wireFormatName(format) << " n=" << n << " rank " << r;
      }
      EXPECT_NE(want[0], send[0][0] + send[1][0] + send[2][0]) << "rounding happened";
    }
  }
}

// Error feedback on the 16-bit allreduce: each rank's rounding keeps its residual for the
// same buffer's next call, and so does each slice's sum. The reference: T steps of
// sum16Reference with the residuals carried by hand, rounding as the wire does.
struct FeedbackReference {
  std::vector<std::vector<float>> sent;  // by rank
  std::vector<float> sum;

  std::vector<float> step(WireFormat format, const std::vector<std::vector<float>>& send) {
    const std::size_t P = send.size(), n = send[0].size();
    if (sent.empty()) sent.assign(P, std::vector<float>(n, 0.0f)), sum.assign(n, 0.0f);
    std::vector<float> out(n);
    for (std::size_t s = 0; s < P; ++s) {
      const std::size_t b = n * s / P, e = n * (s + 1) / P;
      std::vector<float> total(e - b), rounded(e - b);
      for (std::size_t r = 0; r < P; ++r) {
        for (std::size_t i = b; i < e; ++i) sent[r][i] += send[r][i];
        roundThrough(format, sent[r].data() + b, rounded.data(), e - b);
        for (std::size_t i = 0; i < e - b; ++i) {
          sent[r][b + i] -= rounded[i];
          total[i] = r == 0 ? rounded[i] : total[i] + rounded[i];
        }
      }
      for (std::size_t i = 0; i < e - b; ++i) sum[b + i] += total[i];
      roundThrough(format, sum.data() + b, out.data() + b, e - b);
      for (std::size_t i = b; i < e; ++i) sum[i] -= out[i];
    }
    return out;
  }
};

TEST(Sum16, ErrorFeedbackCarriesBothRoundingsIntoTheNextSum) {
  constexpr int P = 3, T = 6;
  constexpr std::size_t n = 1001;
  for (const WireFormat format : {WireFormat::kBf16, WireFormat::kFp16}) {
    // Step t's values: 1 + a small part bf16 cannot hold, some with only 1e-4 beside it.
    auto values = [](int t, int r, std::size_t i) {
      return 1.0f + 1e-3f * static_cast<float>((i + r + t) % 5) + std::sin(0.37f * i + r + t) * (i % 3 == 0 ? 1e-4f : 1.0f);
    };
    LoopbackHub hub(P);
    FailureState failure;
    std::vector<std::vector<std::vector<float>>> got(T, std::vector<std::vector<float>>(P));
    std::vector<std::thread> threads;
    for (int r = 0; r < P; ++r) {
      threads.emplace_back([&, r] {
        auto comm = newCommunicator(hub.transport(r), std::chrono::seconds(10), failure);
        sum16::Feedback feedback(n);
        std::vector<float> send(n);
        for (int t = 0; t < T; ++t) {
          for (std::size_t i = 0; i < n; ++i) send[i] = values(t, r, i);
          got[t][r] = send;
          if (r == 1) {  // in place
            comm->allreduceSum16(format, got[t][r].data(), got[t][r].data(), n, &feedback);
          } else {
            comm->allreduceSum16(format, send.data(), got[t][r].data(), n, &feedback);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    FeedbackReference reference;
    std::vector<double> exact_total(n, 0.0), plain_total(n, 0.0), fed_total(n, 0.0);
    for (int t = 0; t < T; ++t) {
      std::vector<std::vector<float>> send(P, std::vector<float>(n));
      for (int r = 0; r < P; ++r) {
        for (std::size_t i = 0; i < n; ++i) send[r][i] = values(t, r, i);
      }
      const auto want = reference.step(format, send);
      const auto plain = sum16Reference(format, send, n);
      for (int r = 0; r < P; ++r) {
        ASSERT_EQ(std::memcmp(got[t][r].data(), want.data(), n * sizeof(float)), 0)
            << wireFormatName(format) << " step " << t << " rank " << r;
      }
      for (std::size_t i = 0; i < n; ++i) {
        for (int r = 0; r < P; ++r) exact_total[i] += send[r][i];
        plain_total[i] += plain[i];
        fed_total[i] += want[i];
      }
    }
    // What the feedback is for: over T steps, the sums add up to the exact ones but for the
    // last residuals, where without it every step's rounding stays lost.
    double fed_error = 0, plain_error = 0;
    for (std::size_t i = 0; i < n; ++i) {
      fed_error += std::abs(fed_total[i] - exact_total[i]);
      plain_error += std::abs(plain_total[i] - exact_total[i]);
    }
    EXPECT_LT(fed_error, 0.5 * plain_error) << wireFormatName(format);
  }
}

// The step by owner on a 16-bit wire (Communicator::allreduceStepped16), by hand: per
// slice, each rank's contribution rounded (its residual carried in), the owner's fp32 sum
// in rank order, its step (here p = 0.5 p - 0.25 sum, one line of SGD), the update (new
// minus old, the owner's residual carried in) rounded, and every rank holding old + that.
struct SteppedReference {
  FeedbackReference fed;  // sent: the contributions' residuals (sum unused)
  std::vector<float> update;  // the owners' update residuals
  bool feedback = false;

  void step(WireFormat format, const std::vector<std::vector<float>>& send, std::vector<float>& params) {
    const std::size_t P = send.size(), n = send[0].size();
    if (fed.sent.empty()) fed.sent.assign(P, std::vector<float>(n, 0.0f)), update.assign(n, 0.0f);
    for (std::size_t s = 0; s < P; ++s) {
      const std::size_t b = n * s / P, e = n * (s + 1) / P;
      std::vector<float> total(e - b), rounded(e - b), delta(e - b);
      for (std::size_t r = 0; r < P; ++r) {
        for (std::size_t i = b; i < e; ++i) fed.sent[r][i] = feedback ? fed.sent[r][i] + send[r][i] : send[r][i];
        roundThrough(format, fed.sent[r].data() + b, rounded.data(), e - b);
        for (std::size_t i = 0; i < e - b; ++i) {
          fed.sent[r][b + i] -= rounded[i];
          total[i] = r == 0 ? rounded[i] : total[i] + rounded[i];
        }
      }
      for (std::size_t i = 0; i < e - b; ++i) {
        const float old = params[b + i];
        const float fresh = old * 0.5f - total[i] * 0.25f;
        update[b + i] = feedback ? update[b + i] + (fresh - old) : fresh - old;
      }
      roundThrough(format, update.data() + b, delta.data(), e - b);
      for (std::size_t i = 0; i < e - b; ++i) {
        update[b + i] -= delta[i];
        params[b + i] = params[b + i] + delta[i];
      }
    }
  }
};

TEST(Sum16, StepByOwnerSendsRoundedUpdatesAndEveryReplicaEndsEqual) {
  constexpr int P = 3, T = 3;
  for (const bool feedback : {false, true}) {
    for (const WireFormat format : {WireFormat::kBf16, WireFormat::kFp16}) {
      for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{10001}}) {
        auto values = [](int t, int r, std::size_t i) {
          return std::sin(0.37f * i + r + t) * std::pow(10.0f, float(i % 7) - 3);
        };
        std::vector<float> start(n);
        for (std::size_t i = 0; i < n; ++i) start[i] = 1.0f + std::cos(0.11f * i) * 1e-3f;
        LoopbackHub hub(P);
        FailureState failure;
        std::vector<std::vector<float>> got(P, start);
        std::vector<int> calls(P, 0);
        std::vector<std::thread> threads;
        for (int r = 0; r < P; ++r) {
          threads.emplace_back([&, r] {
            auto comm = newCommunicator(hub.transport(r), std::chrono::seconds(10), failure);
            sum16::Feedback residuals(n);
            // The replica in two pieces of memory (the first empty at n = 1).
            std::vector<float> head(got[r].begin(), got[r].begin() + n / 2), tail(got[r].begin() + n / 2, got[r].end());
            const PiecedBuffer targets{{head.data(), tail.data()}, {head.size(), tail.size()}};
            std::vector<float> send(n), slice;
            for (int t = 0; t < T; ++t) {
              for (std::size_t i = 0; i < n; ++i) send[i] = values(t, r, i);
              comm->allreduceStepped16(
                  format, send.data(), targets,
                  [&](std::size_t begin, std::size_t len, const std::vector<GradientView>& from) {
                    ++calls[r];
                    const std::vector<float> sums = rankOrderSum(from, len);
                    slice.resize(len);
                    targets.copyTo(begin, len, slice.data());
                    for (std::size_t i = 0; i < len; ++i) slice[i] = slice[i] * 0.5f - sums[i] * 0.25f;
                    targets.copyFrom(begin, len, slice.data());
                  },
                  feedback ? &residuals : nullptr);
            }
            targets.copyTo(0, n, got[r].data());
          });
        }
        for (auto& t : threads) t.join();
        SteppedReference reference;
        reference.feedback = feedback;
        std::vector<float> want = start;
        for (int t = 0; t < T; ++t) {
          std::vector<std::vector<float>> send(P, std::vector<float>(n));
          for (int r = 0; r < P; ++r) {
            for (std::size_t i = 0; i < n; ++i) send[r][i] = values(t, r, i);
          }
          reference.step(format, send, want);
        }
        if (n == 10001) {  // the roundings happened: the fp32 step ends elsewhere
          std::vector<float> exact = start;
          for (int t = 0; t < T; ++t) {
            for (std::size_t i = 0; i < n; ++i) {
              float sum = 0;
              for (int r = 0; r < P; ++r) sum = r == 0 ? values(t, r, i) : sum + values(t, r, i);
              exact[i] = exact[i] * 0.5f - sum * 0.25f;
            }
          }
          EXPECT_NE(std::memcmp(exact.data(), want.data(), n * sizeof(float)), 0) << wireFormatName(format);
        }
        for (int r = 0; r < P; ++r) {
          EXPECT_EQ(calls[r], T) << "each owner steps its slice once per call";
          ASSERT_EQ(std::memcmp(got[r].data(), want.data(), n * sizeof(float)), 0)
              << wireFormatName(format) << " n=" << n << " rank " << r << " feedback " << feedback;
        }
      }
    }
  }
}

TEST(Sum16, HalfTheRingsBytesAndAScalePerSlice) {
  EXPECT_EQ(allreduce16BytesSent(1000, 4), static_cast<std::uint64_t>(2.0 * 3 / 4 * (1000 + 8) * 2));
  EXPECT_EQ(allreduce16BytesSent(1000, 1), 0u);
  const sum16::Slices slices(10, 3);
  EXPECT_EQ(slices.length(0) + slices.length(1) + slices.length(2), 10u);
  EXPECT_EQ(slices.offset(2), slices.begin(2) + 4);
  EXPECT_EQ(slices.totalWords(), 16u);
}

// A stepped key stores no value (its targets are the values): its push steps them by owner,
// and whatever would read a stored value is refused.
TEST(KVStoreDesigns, AStepKeyStoresNoValueAndItsPushStepsTheTargets) {
  constexpr int P = 2;
  constexpr std::size_t n = 1001;
  LoopbackHub hub(P);
  std::vector<std::vector<float>> got(P);
  std::vector<std::exception_ptr> errors(P);
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      try {
        FailureState failure;
        Engine engine(Engine::Threads{1, 1, 1}, failure);
        auto store = KVStore::create(KVStoreOptions{}, engine, hub.transport(r), failure);
        store->init(3, nullptr, n, /*stepped=*/true);
        EXPECT_EQ(store->count(3), n);
        EXPECT_THROW(store->value(3), Error);
        std::vector<float> grad(n), out(n), params(n, 1.0f);
        for (std::size_t i = 0; i < n; ++i) grad[i] = static_cast<float>(r + 1) * static_cast<float>(i);
        const Engine::Tag grad_tag = engine.newTag("grad"), out_tag = engine.newTag("out");
        EXPECT_THROW(store->push(3, grad.data(), grad_tag), Error);
        EXPECT_THROW(store->pull(3, out.data(), out_tag), Error);
        const PiecedBuffer targets{{params.data()}, {n}};
        store->pushStepped(3, grad.data(), grad_tag, &targets,
                           [&](std::size_t begin, std::size_t len, const std::vector<GradientView>& from) {
                             const std::vector<float> sums = rankOrderSum(from, len);
                             for (std::size_t i = 0; i < len; ++i) params[begin + i] -= sums[i];
                           });
        engine.waitAll(std::chrono::seconds(30));
        got[r] = params;
        engine.shutdown();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < P; ++r) {
    if (errors[r]) std::rethrow_exception(errors[r]);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[r][i], 1.0f - 3.0f * static_cast<float>(i)) << "rank " << r << " value " << i;
  }
}

TEST(KVStoreDesigns, SettingsThatCouldDeadlockAreRefused) {
  EXPECT_THROW((KVStoreOptions{KVStoreType::kConcurrent, 4, 2}.validate()), InputError);
  EXPECT_THROW((KVStoreOptions{KVStoreType::kChained, 0, 1}.validate()), InputError);
  EXPECT_NO_THROW((KVStoreOptions{KVStoreType::kConcurrent, 2, 4}.validate()));
  EXPECT_THROW(parseKVStoreType("ring"), InputError);
}

TEST(Fusion, SmallLayersShareABucketAndALargeOneGoesAlone) {
  // floats: 100, 200, 300, 5000 (too big for 4 KB alone), 50, 60
  const auto b = fuseLayers({{5, 100}, {4, 200}, {3, 300}, {2, 5000}, {1, 50}, {0, 60}}, 4096);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].layers, (std::vector<int>{5, 4, 3}));
  EXPECT_EQ(b[0].offsets, (std::vector<std::int64_t>{0, 100, 300}));
  EXPECT_EQ(b[0].floats, 600);
  EXPECT_EQ(b[1].layers, (std::vector<int>{2}));
  EXPECT_EQ(b[2].layers, (std::vector<int>{1, 0}));
  EXPECT_EQ(b[2].floats, 110);
  EXPECT_EQ(fuseLayers({{1, 10}, {0, 10}}, 0).size(), 2u) << "0 turns fusion off";
}

PlanRequest request(SchemeMode mode) {
  PlanRequest r;
  r.mode = mode;
  return r;
}

ModelInfo convAndFc() {
  ModelInfo m;
  m.name = "t";
  LayerInfo conv{"conv", LayerKind::kConv, {{"w", {64, 32, 3, 3}}}, 0, 0};
  LayerInfo fc{"fc", LayerKind::kFC, {{"w", {512, 4096}}, {"b", {512}}}, 512, 4096};
  m.layers = {conv, fc};
  return m;
}

TEST(AllreduceCost, RingFiguresAndWhenAutoPicksAllreduce) {
  // 2*M*N*(P-1)/P floats each way per worker.
  EXPECT_DOUBLE_EQ(CostModel::allreduceFloats(1000, 1, 4), 2.0 * 2 * 1000 * 3 / 4);
  // Co-located shards move exactly as much as a ring: a tie, which keeps PS unless the
  // request gives ties to allreduce (as a flat BSP session does: scheme_planner_test).
  auto even = planSchemes(convAndFc(), ClusterInfo(4, 0, 0), request(SchemeMode::kAuto));
  EXPECT_DOUBLE_EQ(even[0].allreduce_floats, even[0].ps_floats);
  EXPECT_EQ(even[0].scheme, Scheme::kPS);
  // One shard for four workers: its node carries 2*M*N*(P1-1) = 6*M*N floats, each ring
  // node 4*M*N*3/4 = 3*M*N; the conv layer goes by allreduce, the FC layer stays with SFB.
  auto one_shard = planSchemes(convAndFc(), ClusterInfo(4, 0, 1), request(SchemeMode::kAuto));
  EXPECT_EQ(one_shard[0].scheme, Scheme::kAllreduce);
  EXPECT_EQ(one_shard[1].scheme, Scheme::kSFB);
  PlanRequest timed{SchemeMode::kAuto, CostRule::kTime, 32, PlatformRates{125e6, 20e9}};
  EXPECT_EQ(planSchemes(convAndFc(), ClusterInfo(4, 0, 1), timed)[0].scheme, Scheme::kAllreduce);
  EXPECT_EQ(planSchemes(convAndFc(), ClusterInfo(4, 0, 0), timed)[0].scheme, Scheme::kPS);
  auto forced = planSchemes(convAndFc(), ClusterInfo(4, 0, 0), request(SchemeMode::kAllreduce));
  EXPECT_EQ(forced[0].scheme, Scheme::kAllreduce);
  EXPECT_EQ(forced[1].scheme, Scheme::kAllreduce);
  EXPECT_THROW(planSchemes(convAndFc(), ClusterInfo(4, 1, 0), request(SchemeMode::kAllreduce)), InputError);
  auto single = planSchemes(convAndFc(), ClusterInfo(1, 0, 0), request(SchemeMode::kAllreduce));
  EXPECT_EQ(single[0].scheme, Scheme::kAllreduce) << "forced: the engine path even with nobody to reduce with";
  auto single_auto = planSchemes(convAndFc(), ClusterInfo(1, 0, 0), request(SchemeMode::kAuto));
  EXPECT_EQ(single_auto[0].scheme, Scheme::kPS);
}

}  // namespace
}  // namespace poseidon
