// CPU per byte of a 16-bit allreduce's owner step in bf16 (issue 38): the slice's sum as
// the code makes it now (reduceSlice: decode, add and round a 4 K chunk at a time) against
// the way it did before (composed here from the same primitives: every rank's values
// widened into one slice-long fp32 sum, then the sum rounded whole), with and without
// error feedback, side by side on one thread; rounds alternate, medians; the two results
// (and residuals) checked equal bit for bit.
//
//   build/bench/sum16_reduce [--floats N] [--ranks P] [--rounds R]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "allreduce/sum16.h"
#include "timing.h"

namespace poseidon {
namespace {

using bench::median;
using bench::seconds;

constexpr std::size_t kChunk = 4096;

// The owner's step before: the whole slice's fp32 sum, then one encodeSlice.
void reduceBefore(const std::vector<const std::uint16_t*>& from, std::size_t n, std::uint16_t* out,
                  sum16::Carried carried) {
  const std::unique_ptr<float[]> sum(new float[n]);
  sum16::decodeSlice(WireFormat::kBf16, from[0], n, sum.get());
  std::vector<float> block(kChunk);
  for (std::size_t r = 1; r < from.size(); ++r) {
    for (std::size_t i = 0; i < n; i += kChunk) {
      const std::size_t c = std::min(kChunk, n - i);
      widen(HalfSpan{WireFormat::kBf16, 1.0f, from[r] + sum16::Slices::kScaleWords}, i, block.data(), c);
      for (std::size_t j = 0; j < c; ++j) sum[i + j] += block[j];
    }
  }
  sum16::encodeSlice(WireFormat::kBf16, sum.get(), n, out, carried);
}

int run(std::size_t n, int ranks, int rounds, bool feedback) {
  const std::size_t words = sum16::Slices::kScaleWords + n;
  std::vector<std::vector<std::uint16_t>> encoded(ranks, std::vector<std::uint16_t>(words));
  std::vector<float> g(n);
  for (int r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < n; ++i) g[i] = std::sin(0.02f * i + r) * 3e-3f;
    sum16::encodeSlice(WireFormat::kBf16, g.data(), n, encoded[r].data());
  }
  std::vector<const std::uint16_t*> from;
  for (const auto& e : encoded) from.push_back(e.data());
  std::vector<std::uint16_t> a(words), b(words);
  Residual ra(feedback ? n : 0), rb(feedback ? n : 0);
  std::vector<double> before, now;
  for (int round = 0; round < rounds + 1; ++round) {  // the first round pages the buffers in
    const double tb = seconds([&] { reduceBefore(from, n, a.data(), {feedback ? &ra : nullptr, 0}); });
    const double tn = seconds([&] { sum16::reduceSlice(WireFormat::kBf16, from, n, b.data(), {feedback ? &rb : nullptr, 0}); });
    if (a != b || (feedback && std::memcmp(ra.data(), rb.data(), n * sizeof(float)) != 0)) {
      std::fprintf(stderr, "sum16_reduce: the two sums differ (feedback %d)\n", feedback);
      return 1;
    }
    if (round == 0) continue;
    before.push_back(tb);
    now.push_back(tn);
  }
  std::printf("  bf16 owner step of %d ranks%s: before %.3f ms, now %.3f ms (%.2fx); %.2f GB/s of fp32 sum now\n",
              ranks, feedback ? " with error feedback" : "", median(before) * 1e3, median(now) * 1e3,
              median(before) / median(now), n * 4 / 1e9 / median(now));
  return 0;
}

}  // namespace
}  // namespace poseidon

int main(int argc, char** argv) {
  std::size_t floats = 1 << 20;  // a slice of a 16 MB bucket at 4 ranks
  int ranks = 4, rounds = 41;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--floats") == 0) floats = static_cast<std::size_t>(std::atoll(argv[i + 1]));
    if (std::strcmp(argv[i], "--ranks") == 0) ranks = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  if (floats == 0 || ranks < 1 || rounds < 1) {
    std::fprintf(stderr, "sum16_reduce: --floats, --ranks and --rounds must be positive\n");
    return 2;
  }
  std::printf("one slice of %zu floats (%.1f MB fp32), one thread, kernels: %s, %d rounds, medians; "
              "results checked equal bit for bit\n",
              floats, floats * 4 / 1e6, poseidon::halfKernels(), rounds);
  for (bool feedback : {false, true}) {
    if (poseidon::run(floats, ranks, rounds, feedback) != 0) return 1;
  }
  return 0;
}
