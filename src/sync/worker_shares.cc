#include "sync/worker_shares.h"

#include "poseidon/errors.h"

namespace poseidon {

WorkerShares::WorkerShares(int workers, int layer, const char* what) : workers_(workers), layer_(layer), what_(what) {
  for (auto& a : arrived_) a.resize(static_cast<std::size_t>(workers_));
}

void WorkerShares::keep(Message m, std::uint64_t current) {
  const auto& h = m.header();
  if (h.source >= static_cast<std::uint32_t>(workers_)) {
    throw CommError(detail::cat("rank ", h.source, " sent ", what_, " for layer ", layer_, " but is no worker"));
  }
  if (h.iteration != current && h.iteration != current + 1) {
    throw CommError(detail::cat("layer ", layer_, ": ", what_, " of iteration ", h.iteration, " from rank ", h.source,
                                " while at iteration ", current, " (BSP allows only that one and the next)"));
  }
  auto& slot = arrived_[h.iteration % 2][h.source];
  if (!slot.empty()) {
    throw CommError(detail::cat("layer ", layer_, ": rank ", h.source, " sent ", what_, " twice for iteration ",
                                h.iteration));
  }
  slot = std::move(m);
  ++count_[h.iteration % 2];
}

std::vector<Message> WorkerShares::take(std::uint64_t iteration) {
  std::vector<Message> shares;
  shares.swap(arrived_[iteration % 2]);
  arrived_[iteration % 2].resize(static_cast<std::size_t>(workers_));
  count_[iteration % 2] = 0;
  return shares;
}

}  // namespace poseidon
