#include "coordinator/rate_probe.h"


#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/control_channel.h"
#include "common/gemm.h"

namespace poseidon {

double gemmRate(std::int64_t m, std::int64_t n, std::int64_t k) {
  std::vector<float> a(static_cast<std::size_t>(m * k), 0.5f), b(static_cast<std::size_t>(k * n), 0.25f),
      c(static_cast<std::size_t>(m * n));
  auto once = [&] {
    gemmTransposedA(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a.data(),
                    static_cast<int>(m), b.data(), static_cast<int>(n), c.data(), static_cast<int>(n));
  };
  once();  // warm-up: page in the operands and the output
  const auto start = std::chrono::steady_clock::now();
  once();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * m * n * k / std::max(s, 1e-9);
}

PlatformRates measureRates(ControlChannel& control, int rank, int ranks, const ModelInfo& model, int workers,
                           std::int64_t batch, PlatformRates known) {
  PlatformRates r = known;
  if (r.gemm_flops_per_s <= 0 && rank == 0) {
    std::int64_t M = 1024, N = 1024;
    for (const auto& l : model.layers) {
      if (l.kind == LayerKind::kFC && l.M * l.N > M * N) M = l.M, N = l.N;
    }
    r.gemm_flops_per_s = gemmRate(M, N, batch * workers);
  }
  if (r.bandwidth_bytes_per_s <= 0 && ranks > 1) {
    std::vector<float> payload(2 << 20, 1.0f);  // 8 MB
    double best = 0;
    for (int round = 0; round < 2; ++round) {
      control.barrier("bandwidth probe");
      const auto start = std::chrono::steady_clock::now();
      control.broadcastFloats(payload.data(), payload.size(), 0, "bandwidth probe");
      control.barrier("bandwidth probe");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::max(best, payload.size() * sizeof(float) * (ranks - 1) / std::max(s, 1e-9));
    }
    r.bandwidth_bytes_per_s = best;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g %.17g", r.bandwidth_bytes_per_s, r.gemm_flops_per_s);
  const std::string agreed = control.broadcast(buf, 0, "measured rates");
  std::sscanf(agreed.c_str(), "%lg %lg", &r.bandwidth_bytes_per_s, &r.gemm_flops_per_s);
  return r;
}

}  // namespace poseidon
