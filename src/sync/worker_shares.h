// Every worker's share of one layer's iteration, as a syncer that steps its own replica
// collects them (SFB's factors, sparse rows): BSP lets a fast peer's share for t+1 arrive
// while this worker still moves t, so shares are kept by iteration parity. No lock of its
// own: the syncer calls it under its mutex, beside the other state it waits on.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/message.h"

namespace poseidon {

class WorkerShares {
 public:
  // `what` names the shares in errors ("factors", "rows").
  WorkerShares(int workers, int layer, const char* what);
  // Keeps m (from header().source, for header().iteration). CommError for a sender that is
  // no worker, an iteration other than `current` and the next, or a second share.
  void keep(Message m, std::uint64_t current);
  // Whether every worker's share of `iteration` is in.
  bool complete(std::uint64_t iteration) const { return count_[iteration % 2] == workers_; }
  // Every worker's share of `iteration`, by rank, the slots emptied for iteration + 2.
  std::vector<Message> take(std::uint64_t iteration);

 private:
  const int workers_;
  const int layer_;
  const char* what_;
  std::vector<Message> arrived_[2];  // by worker rank
  int count_[2] = {0, 0};
};

}  // namespace poseidon
