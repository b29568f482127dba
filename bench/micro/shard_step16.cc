// CPU per byte of a 16-bit wire's server step and error-feedback push (issue 38), the way
// the code does them now against the way it did them before (composed here from the same
// primitives), side by side on one thread; rounds alternate, medians.
//
// Step: one KV pair of --floats values, BSP, 4 workers (3 pushes in bf16 or fp16 off the
// wire, the co-located worker's in fp32), SGD with momentum, then the 16-bit update back.
//   before: each push widened into a fresh fp32 buffer, summed; the update made as
//           values - before into a buffer, packed, unpacked whole, added to before.
//   now:    pushes summed from their 16 bits a block at a time (sgdStepViews); the update
//           packed with its decoding and the shard's new values written chunk by chunk
//           (packHalfReading).
// Push with error feedback: carry, pack, decode whole, keep (before) against carry, then
// pack and keep chunk by chunk (now).
//
//   build/bench/shard_step16 [--floats N] [--rounds R]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/error_feedback.h"
#include "comm/gradient16.h"
#include "update/sgd.h"
#include "timing.h"

namespace poseidon {
namespace {

constexpr int kWorkers = 4;

using bench::median;
using bench::seconds;

// One pair's shard state and the pushes of one step.
struct Pair {
  std::size_t n;
  WireFormat format;
  std::vector<float> values, momentum, local;  // local: the co-located worker's rounded push
  std::vector<Message> pushes;                 // from the other workers, kPushGrad16
  SgdOptions options{0.01f, 0.9f, 1e-4f};

  Pair(std::size_t n, WireFormat format) : n(n), format(format), values(n), momentum(n), local(n) {
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = std::sin(0.001f * i);
    for (int w = 0; w < kWorkers; ++w) {
      for (std::size_t i = 0; i < n; ++i) g[i] = std::cos(0.01f * i + w) * 1e-2f;
      if (w == 0) {
        roundThrough(format, g.data(), local.data(), n);
      } else {
        pushes.push_back(packHalf(MsgType::kPushGrad16, format, 0, w, 0, g.data(), n));
      }
    }
  }
};

Message stepBefore(Pair& p, std::vector<float>& before, std::vector<float>& update) {
  std::vector<std::unique_ptr<float[]>> widened;
  std::vector<const float*> grads = {p.local.data()};
  for (const Message& m : p.pushes) {
    widened.emplace_back(new float[p.n]);  // the fp32 message ParameterServer::widen made per push (not zeroed)
    unpackHalf(m, widened.back().get(), p.n);
    grads.push_back(widened.back().get());
  }
  before.assign(p.values.begin(), p.values.end());
  sgdStep(p.values.data(), p.momentum.data(), grads, 1.0f / kWorkers, static_cast<std::int64_t>(p.n), p.options,
          false);
  update.resize(p.n);
  for (std::size_t i = 0; i < p.n; ++i) update[i] = p.values[i] - before[i];
  Message m = packHalf(MsgType::kParams16, p.format, 0, 0, 1, update.data(), p.n);
  unpackHalf(m, update.data(), p.n);
  for (std::size_t i = 0; i < p.n; ++i) p.values[i] = before[i] + update[i];
  return m;
}

Message stepNow(Pair& p, std::vector<float>& before) {
  std::vector<GradientView> grads = {GradientView{p.local.data(), {}}};
  for (const Message& m : p.pushes) grads.push_back(GradientView{nullptr, halfSpanOf(m, p.n)});
  before.assign(p.values.begin(), p.values.end());
  sgdStepViews(p.values.data(), p.momentum.data(), grads, 1.0f / kWorkers, static_cast<std::int64_t>(p.n), p.options,
               false);
  float* values = p.values.data();
  for (std::size_t i = 0; i < p.n; ++i) values[i] -= before[i];
  return packHalfReading(MsgType::kParams16, p.format, 0, 0, 1, values, p.n,
                         [&](std::size_t from, const float* read, std::size_t m) {
                           for (std::size_t j = 0; j < m; ++j) values[from + j] = before[from + j] + read[j];
                         });
}

Message pushBefore(Residual& r, const std::vector<float>& g, WireFormat f, std::vector<float>& decoded) {
  Message m = packHalf(MsgType::kPushGrad16, f, 0, 1, 0, r.carry(g.data()), g.size());
  decoded.resize(g.size());
  unpackHalf(m, decoded.data(), g.size());
  r.keep(decoded.data());
  return m;
}

Message pushNow(Residual& r, const std::vector<float>& g, WireFormat f) {
  return packHalfReading(MsgType::kPushGrad16, f, 0, 1, 0, r.carry(g.data()), g.size(),
                         [&](std::size_t from, const float* read, std::size_t m) { r.keep(from, read, m); });
}

bool samePayload(const Message& a, const Message& b) {
  return a.payloadBytes() == b.payloadBytes() && std::memcmp(a.payload(), b.payload(), a.payloadBytes()) == 0;
}

int run(std::size_t n, int rounds, WireFormat f) {
  Pair before_pair(n, f), now_pair(n, f);
  std::vector<float> before, update, decoded, g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = std::sin(0.02f * i) * 3e-3f;
  Residual r_before(n), r_now(n);
  std::vector<double> step_before, step_now, push_before, push_now;
  for (int round = 0; round < rounds + 1; ++round) {  // the first round pages the buffers in
    Message a, b;
    const double sb = seconds([&] { a = stepBefore(before_pair, before, update); });
    const double sn = seconds([&] { b = stepNow(now_pair, before); });
    if (!samePayload(a, b) || before_pair.values != now_pair.values) {
      std::fprintf(stderr, "shard_step16: the two steps differ (%s)\n", wireFormatName(f).c_str());
      return 1;
    }
    const double pb = seconds([&] { a = pushBefore(r_before, g, f, decoded); });
    const double pn = seconds([&] { b = pushNow(r_now, g, f); });
    if (!samePayload(a, b) || std::memcmp(r_before.data(), r_now.data(), n * sizeof(float)) != 0) {
      std::fprintf(stderr, "shard_step16: the two pushes differ (%s)\n", wireFormatName(f).c_str());
      return 1;
    }
    if (round == 0) continue;
    step_before.push_back(sb);
    step_now.push_back(sn);
    push_before.push_back(pb);
    push_now.push_back(pn);
  }
  const double mb = n * 4 / 1e6;
  std::printf("  %s step of %d pushes: before %.3f ms, now %.3f ms (%.2fx); %.2f GB/s of fp32 gradient now\n",
              wireFormatName(f).c_str(), kWorkers, median(step_before) * 1e3, median(step_now) * 1e3,
              median(step_before) / median(step_now), kWorkers * mb / 1e3 / median(step_now));
  std::printf("  %s push with error feedback: before %.3f ms, now %.3f ms (%.2fx)\n", wireFormatName(f).c_str(),
              median(push_before) * 1e3, median(push_now) * 1e3, median(push_before) / median(push_now));
  return 0;
}

}  // namespace
}  // namespace poseidon

int main(int argc, char** argv) {
  std::size_t floats = 512 * 1024;  // one KV pair of the default 2 MB
  int rounds = 41;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--floats") == 0) floats = static_cast<std::size_t>(std::atoll(argv[i + 1]));
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  if (floats == 0 || rounds < 1) {
    std::fprintf(stderr, "shard_step16: --floats and --rounds must be positive\n");
    return 2;
  }
  std::printf("one KV pair of %zu floats (%.1f MB fp32), one thread, kernels: %s, %d rounds, medians; "
              "results checked equal bit for bit\n",
              floats, floats * 4 / 1e6, poseidon::halfKernels(), rounds);
  for (auto f : {poseidon::WireFormat::kBf16, poseidon::WireFormat::kFp16}) {
    if (poseidon::run(floats, rounds, f) != 0) return 1;
  }
  return 0;
}
