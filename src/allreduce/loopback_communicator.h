// A Communicator for threads-as-ranks unit tests, on the loopback transport's rendezvous
// (comm/loopback_rendezvous.h), which sums in rank order and checks that every rank
// called the same collective.
#pragma once

#include <memory>

#include "allreduce/communicator.h"
#include "comm/loopback_rendezvous.h"

namespace poseidon {

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
