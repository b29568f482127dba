// GB/s of the 16-bit wire conversions (src/common/half.h) on one thread, side by side with
// torch's own conversion on one thread (the baseline: `copy_` into a bf16 / fp16 tensor
// made beforehand, as ours writes into a buffer made beforehand),
// over ResNet-50's 102 MB of fp32 gradients. Rounds alternate ours and torch's; medians.
//
//   build/bench/half_convert [--floats N] [--rounds R]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/half.h"
#include "timing.h"

using poseidon::bench::median;
using poseidon::bench::seconds;

int main(int argc, char** argv) {
  std::int64_t floats = 25'600'000;  // ResNet-50's parameters
  int rounds = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--floats") == 0) floats = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(1);  // a conversion runs on one sending thread
  torch::manual_seed(0);
  const torch::Tensor grads = torch::randn({floats}) * 1e-3;
  const float* in = grads.data_ptr<float>();
  std::vector<std::uint16_t> wire(static_cast<std::size_t>(floats));
  std::vector<float> back(static_cast<std::size_t>(floats));
  torch::Tensor bf16_out = torch::empty({floats}, torch::kBFloat16);
  torch::Tensor fp16_out = torch::empty({floats}, torch::kHalf);
  const auto n = static_cast<std::size_t>(floats);
  struct Case {
    const char* name;
    std::function<void()> run;
    std::vector<double> s;
  };
  std::vector<Case> cases = {
      {"poseidon to bf16", [&] { poseidon::toBf16(in, wire.data(), n); }, {}},
      {"torch to bf16", [&] { bf16_out.copy_(grads); }, {}},
      {"poseidon from bf16", [&] { poseidon::fromBf16(wire.data(), back.data(), n); }, {}},
      // As a syncer does it: a scale per KV pair (2 MB by default), so the second pass
      // reads from cache.
      {"poseidon to fp16 (scale + convert)",
       [&] {
         constexpr std::size_t kPair = 512 * 1024;
         for (std::size_t i = 0; i < n; i += kPair) {
           const std::size_t m = std::min(kPair, n - i);
           poseidon::toFp16(in + i, wire.data() + i, m, poseidon::fp16Scale(in + i, m));
         }
       },
       {}},
      {"torch to fp16 (no scale)", [&] { fp16_out.copy_(grads); }, {}},
      {"poseidon from fp16", [&] { poseidon::fromFp16(wire.data(), back.data(), n, 1.0f); }, {}},
  };
  for (int r = 0; r < rounds + 1; ++r) {
    for (auto& c : cases) {
      const double s = seconds(c.run);
      if (r > 0) c.s.push_back(s);  // the first round pages the buffers in
    }
  }
  std::printf("%lld floats (%.0f MB fp32), one thread, kernels: %s, %d rounds, medians\n",
              static_cast<long long>(floats), floats * 4 / 1e6, poseidon::halfKernels(), rounds);
  for (const auto& c : cases) {
    std::printf("  %-36s %7.2f GB/s of fp32\n", c.name, floats * 4 / median(c.s) / 1e9);
  }
  std::printf("  poseidon/torch: bf16 %.2fx, fp16 %.2fx\n", median(cases[1].s) / median(cases[0].s),
              median(cases[4].s) / median(cases[3].s));
  return 0;
}
