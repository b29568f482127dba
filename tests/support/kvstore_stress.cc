#include "kvstore_stress.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "allreduce/communicator.h"
#include "allreduce/communicators.h"
#include "allreduce/ring_order.h"
#include "comm/gradient16.h"
#include "comm/transport.h"
#include "engine/external_event.h"

namespace poseidon {

std::vector<float> rankOrderSum(const std::vector<GradientView>& from, std::size_t n) {
  std::vector<float> sum(n), one(n);
  for (std::size_t r = 0; r < from.size(); ++r) {
    if (from[r].fp32 != nullptr) {
      std::copy(from[r].fp32, from[r].fp32 + n, one.begin());
    } else {
      widen(from[r].half, 0, one.data(), n);
    }
    for (std::size_t i = 0; i < n; ++i) sum[i] = r == 0 ? one[i] : sum[i] + one[i];
  }
  return sum;
}

namespace {

// Sizes from one float to a few MB, so both latency- and bandwidth-bound collectives run.
const std::vector<std::size_t> kSizes = {1, 7, 1000, 65536, 3, 400000, 128, 1 << 20};

// Eighths: fp32 sums of them stay exact, while bf16 (8 significant bits) drops them from 32
// up, so a rank's own rounding loses something too, not only the sum's. One value in 11 adds
// +-2^25 (rank + 1), where fp32's spacing is 4 or more: there the sum depends on the order
// of the additions, and only the order the reference takes gives its bits.
float value(int rank, std::size_t key, int iteration, std::size_t i) {
  const float eighths =
      static_cast<float>((rank + 1) * (static_cast<int>(key) + 1) + iteration + static_cast<int>(i % 7)) +
      0.125f * static_cast<float>((i + static_cast<std::size_t>(rank)) % 3);
  if (i % 11 != 5) return eighths;
  const float big = 33554432.0f * static_cast<float>(rank + 1);  // 2^25 (rank + 1)
  return eighths + (rank % 2 == 0 ? big : -big);
}

float rounded(WireFormat wire, float x) {
  roundThrough(wire, &x, &x, 1);
  return x;
}

// The sum of value() over the ranks: in fp32 in the ring's order (ring_order.h: from the
// rank after the owner of the value's slice around to the owner), as the communicators add.
// On bf16 (sum16.h, which has no scale, so it can be written per value) each rank's value
// rounded, added in rank order, the sum rounded: values past 256 lose bits, so the 16-bit
// path's slicing and order are checked. The owner's fp32 sum before its rounding: every
// rank's value as the wire carries it, added in the wire's order.
float ownersSum(WireFormat wire, int P, std::size_t key, int iteration, std::size_t i) {
  const int first = wire == WireFormat::kFp32 ? ringFirst(sliceOf(i, kSizes[key], P), P) : 0;
  float sum = 0;
  for (int j = 0; j < P; ++j) {
    const float v = rounded(wire, value((first + j) % P, key, iteration, i));
    sum = j == 0 ? v : sum + v;
  }
  return sum;
}

float expectedSum(WireFormat wire, int P, std::size_t key, int iteration, std::size_t i) {
  return rounded(wire, ownersSum(wire, P, key, iteration, i));
}

// expectedSum with error feedback, one key's values over the iterations: every rank's
// residual (this rank plays all of them) and the sums' residual, carried value by value.
struct FeedbackReference {
  std::vector<std::vector<float>> sent;  // by rank
  std::vector<float> sum;

  FeedbackReference(int P, std::size_t n) : sent(P, std::vector<float>(n, 0.0f)), sum(n, 0.0f) {}
  float next(WireFormat wire, std::size_t key, int iteration, std::size_t i) {
    float total = 0;
    for (std::size_t r = 0; r < sent.size(); ++r) {
      const float carried = sent[r][i] + value(static_cast<int>(r), key, iteration, i);
      const float v = rounded(wire, carried);
      sent[r][i] = carried - v;
      total = r == 0 ? v : total + v;
    }
    const float carried = sum[i] + total;
    const float out = rounded(wire, carried);
    sum[i] = carried - out;
    return out;
  }
};

// value() of this rank for every index of key k's buffer.
std::vector<float> valuesOf(int rank, std::size_t k, int iteration) {
  std::vector<float> v(kSizes[k]);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(rank, k, iteration, i);
  return v;
}

// The communicator's sums in place (send == recv), which no store push takes: every size
// once, on a communicator of its own, each value checked as the pushes' are.
std::int64_t inPlaceSumsWrong(Transport& transport, const KVStoreOptions& options, int P, int iteration,
                              FailureState& failure) {
  auto comm = newCommunicator(transport, options.timeout, failure);
  std::int64_t bad = 0;
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    std::vector<float> buf = valuesOf(transport.rank(), k, iteration);
    comm->sum(options.wire, buf.data(), buf.data(), buf.size());
    for (std::size_t i = 0; i < buf.size(); ++i) bad += buf[i] != expectedSum(options.wire, P, k, iteration, i);
  }
  return bad;
}

// The value every replica holds before a step by owner: the same on every rank, with
// bits below bf16's so the 16-bit update's rounding shows.
float before(std::size_t i) { return -1.0f - 0.0078125f * static_cast<float>(i % 13); }

// The step by owner: targets in three pieces of memory, a "step" that writes each sum it
// is given into its slice of them. fp32: every rank's targets must end as the sums, every
// slice gathered from its owner into the right piece. 16 bits (bf16: no scale, so per
// value): as the old value plus the update (the owner's unrounded sum minus the old value)
// rounded, on every rank.
std::int64_t steppedSumsWrong(Transport& transport, const KVStoreOptions& options, int P, int iteration,
                              FailureState& failure) {
  auto comm = newCommunicator(transport, options.timeout, failure);
  const WireFormat wire = options.wire;
  std::int64_t bad = 0;
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    const std::size_t n = kSizes[k];
    const std::vector<float> send = valuesOf(transport.rank(), k, iteration);
    const std::size_t cut1 = n / 3, cut2 = 2 * n / 3;
    std::vector<std::vector<float>> pieces{std::vector<float>(cut1), std::vector<float>(cut2 - cut1),
                                           std::vector<float>(n - cut2)};
    PiecedBuffer targets;
    for (auto& piece : pieces) {
      targets.pieces.push_back(piece.data());
      targets.sizes.push_back(piece.size());
    }
    std::vector<float> old(n);
    for (std::size_t i = 0; i < n; ++i) old[i] = before(i);
    targets.copyFrom(0, n, old.data());
    int calls = 0;
    comm->stepped(wire, send.data(), targets,
                  [&](std::size_t begin, std::size_t len, const std::vector<GradientView>& from) {
                    ++calls;
                    targets.copyFrom(begin, len, rankOrderSum(from, len).data());
                  });
    bad += calls != 1;
    std::size_t i = 0;
    for (const auto& piece : pieces) {
      for (float v : piece) {
        const float sum = ownersSum(wire, P, k, iteration, i);
        const float want = wire == WireFormat::kFp32 ? sum : before(i) + rounded(wire, sum - before(i));
        bad += v != want;
        ++i;
      }
    }
  }
  return bad;
}

}  // namespace

StressResult runKVStoreStress(Transport& transport, const KVStoreOptions& options, int iterations, std::uint64_t seed) {
  const int rank = transport.rank();
  const int P = transport.size();
  const std::size_t K = kSizes.size();
  FailureState failure;
  Engine engine(Engine::Threads{1, 1, options.commThreads()}, failure);
  auto store = KVStore::create(options, engine, transport, failure);

  std::vector<std::vector<float>> grad(K), out(K);
  std::vector<Engine::Tag> grad_tag(K), out_tag(K);
  std::vector<ExternalEvent> ready(K);
  for (std::size_t k = 0; k < K; ++k) {
    grad[k].assign(kSizes[k], 0.0f);
    out[k].assign(kSizes[k], 0.0f);
    grad_tag[k] = engine.newTag("grad");
    out_tag[k] = engine.newTag("out");
    std::vector<float> init(kSizes[k], static_cast<float>(rank));  // rank 0's zeros must win
    store->init(static_cast<int>(k), init.data(), init.size());
  }
  std::vector<FeedbackReference> feedback;  // with error feedback: by key
  for (std::size_t k = 0; options.error_feedback && k < K; ++k) feedback.emplace_back(P, kSizes[k]);
  std::atomic<std::int64_t> wrong{0};
  // init gives every rank rank 0's value (zeros).
  for (std::size_t k = 0; k < K; ++k) store->pull(static_cast<int>(k), out[k].data(), out_tag[k]);
  engine.waitAll(options.timeout);
  for (std::size_t k = 0; k < K; ++k)
    wrong += std::count_if(out[k].begin(), out[k].end(), [](float v) { return v != 0; });
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it) {
    for (std::size_t j = 0; j < K; ++j) {
      const std::size_t k = K - 1 - j;
      engine.pushAsync([&ready, k](Engine::Done d) { ready[k].arm(std::move(d)); }, {}, {grad_tag[k]},
                       Engine::Kind::kCopy);
      store->push(static_cast<int>(k), grad[k].data(), grad_tag[k]);
    }
    for (std::size_t j = 0; j < K; ++j) {
      const std::size_t k = K - 1 - j;
      // Odd iterations read the sums where the store keeps them, as the allreduce buckets'
      // step does (reading the key's tag, before the next push mutates it); even ones pull.
      const bool in_store = it % 2 == 1;
      if (!in_store) store->pull(static_cast<int>(k), out[k].data(), out_tag[k]);
      const float* sums = in_store ? store->value(static_cast<int>(k)) : out[k].data();
      engine.push(
          [&, k, it, sums] {
            std::int64_t bad = 0;
            for (std::size_t i = 0; i < kSizes[k]; ++i) {
              const float want = feedback.empty() ? expectedSum(options.wire, P, k, it, i)
                                                  : feedback[k].next(options.wire, k, it, i);
              bad += sums[i] != want;
            }
            wrong += bad;
          },
          {in_store ? store->tag(static_cast<int>(k)) : out_tag[k]}, {}, Engine::Kind::kCompute);
    }
    // The gradients appear in a random order, with random gaps, different on every rank.
    std::mt19937_64 rng(seed * 1000003 + static_cast<std::uint64_t>(rank) * 7919 + static_cast<std::uint64_t>(it));
    std::vector<std::size_t> order(K);
    for (std::size_t k = 0; k < K; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), rng);
    std::thread producer([&] {
      for (std::size_t k : order) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1500));
        for (std::size_t i = 0; i < grad[k].size(); ++i) grad[k][i] = value(rank, k, it, i);
        ready[k].fire();
      }
    });
    producer.join();
    engine.waitAll(options.timeout);
  }
  StressResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  wrong += inPlaceSumsWrong(transport, options, P, iterations, failure);
  wrong += steppedSumsWrong(transport, options, P, iterations + 1, failure);
  result.wrong_values = wrong.load();
  result.collectives = static_cast<std::int64_t>(K) * iterations;
  store->stop();
  engine.shutdown();
  return result;
}

}  // namespace poseidon
