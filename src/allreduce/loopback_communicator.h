// A Communicator for threads-as-ranks unit tests: the ranks meet at a rendezvous, the
// last to arrive does the arithmetic (summing in rank order) for all of them. It also
// checks what MPI cannot: that every rank called the same collective with the same
// count, so a test of an ordering design fails with a message instead of hanging.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "allreduce/communicator.h"

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

class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<LoopbackRendezvous> rendezvous, int rank)
      : rendezvous_(std::move(rendezvous)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return rendezvous_->size(); }
  void allreduceSum(const float* send, float* recv, std::size_t count) override {
    rendezvous_->run(rank_, 0, send, recv, count, 0);
    counted(allreduceBytesSent(count, size()));  // what MPI would move: counted alike
  }
  void broadcast(float* data, std::size_t count, int root) override {
    rendezvous_->run(rank_, 1, data, data, count, root);
    counted(broadcastBytesSent(count, size()));
  }

 private:
  std::shared_ptr<LoopbackRendezvous> rendezvous_;
  const int rank_;
};

}  // namespace poseidon
