#include "progress.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace poseidon::app {

void ProgressPrinter::iteration(std::int64_t it, std::int64_t total, std::int64_t epoch, std::int64_t epochs,
                                const std::function<double()>& loss, double s_per_iter, double images_per_iter,
                                bool force, const std::function<std::uint64_t()>& dropped) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool due = every_ > 0 ? (it + 1) % every_ == 0 : std::chrono::duration<double>(now - last_).count() >= 5.0;
  if (!due && !force) return;
  last_ = now;
  std::printf("poseidon: epoch %lld/%lld iter %lld/%lld loss %.4f %.3f s/iter %.1f images/s",
              static_cast<long long>(epoch + 1), static_cast<long long>(epochs), static_cast<long long>(it + 1),
              static_cast<long long>(total), loss(), s_per_iter, s_per_iter > 0 ? images_per_iter / s_per_iter : 0.0);
  // Seen by this rank's shard: a straggler shows up at every shard it is late for.
  // Read only for a line that prints: the session's statistics are not free.
  if (const std::uint64_t n = dropped())
    std::printf(", %llu straggler updates dropped", static_cast<unsigned long long>(n));
  std::printf("\n");
  std::fflush(stdout);
}

void maybeInjectFault(int rank, std::int64_t iteration) {
  static const char* delay = std::getenv("POSEIDON_FAULT_DELAY");
  int dr = -1;
  long long dit = -1, ms = 0;
  if (delay && std::sscanf(delay, "%d:%lld:%lld", &dr, &dit, &ms) == 3 && dr == rank && dit == iteration) {
    std::fprintf(stderr, "poseidon: rank %d: POSEIDON_FAULT_DELAY: stalling %lld ms at iteration %lld\n", rank, ms,
                 dit);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  static const char* spec = std::getenv("POSEIDON_FAULT_EXIT");
  if (!spec) return;
  int r = -1;
  long long it = -1;
  if (std::sscanf(spec, "%d:%lld", &r, &it) == 2 && r == rank && it == iteration) {
    std::fprintf(stderr, "poseidon: rank %d: POSEIDON_FAULT_EXIT: dying at iteration %lld\n", rank, it);
    std::_Exit(17);
  }
}

}  // namespace poseidon::app
