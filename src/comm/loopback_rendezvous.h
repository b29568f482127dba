// The in-process transport's collective: the ranks (threads) of one channel meet here and
// the last to arrive copies the root's values to all of them (a broadcast: the loopback
// communicator builds its sums from broadcasts). It also checks what MPI cannot: that
// every rank's broadcast has the same count and root, so most tests of an ordering design
// that call collectives in different orders fail with a message instead of hanging (an
// allreduce is P broadcasts: one meeting a lone broadcast from root 0 is not told apart).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace poseidon {

// The meeting point of one communicator, shared by its ranks.
class LoopbackRendezvous {
 public:
  LoopbackRendezvous(int size, std::chrono::milliseconds timeout);
  // data = root's data on every rank.
  void run(int rank, float* data, std::size_t count, int root);
  int size() const { return size_; }

 private:
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<float*> data_;
  std::vector<std::size_t> count_;
  std::vector<int> root_;
  int arrived_ = 0;
  int left_ = 0;
  bool draining_ = false;
  std::uint64_t generation_ = 0;
  bool mismatch_ = false;
};

}  // namespace poseidon
