// The in-process transport's collectives: the ranks (threads) of one channel meet here and
// the last to arrive does the arithmetic for all of them, summing in rank order. It also
// checks what MPI cannot: that every rank called the same collective with the same count,
// so a test of an ordering design fails with a message instead of hanging.
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
  // op: 0 allreduce, 1 broadcast.
  void run(int rank, int op, const float* send, float* recv, std::size_t count, int root);
  int size() const { return size_; }

 private:
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<const float*> send_;
  std::vector<float*> recv_;
  std::vector<std::size_t> count_;
  std::vector<int> op_;
  int arrived_ = 0;
  int left_ = 0;
  bool draining_ = false;
  std::uint64_t generation_ = 0;
  bool mismatch_ = false;
};

}  // namespace poseidon
