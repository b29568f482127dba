// A Communicator for threads-as-ranks unit tests, on the loopback transport's rendezvous
// (comm/loopback_rendezvous.h), which broadcasts and checks that every rank called the
// same collective. Its sums add in the ring's order (ring_order.h), as MPI's do.
#pragma once

#include <memory>
#include <vector>

#include "allreduce/communicator.h"
#include "allreduce/ring_order.h"
#include "allreduce/sum16.h"
#include "comm/loopback_rendezvous.h"

namespace poseidon {

class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<LoopbackRendezvous> rendezvous, int rank)
      : rendezvous_(std::move(rendezvous)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return rendezvous_->size(); }
  void allreduceSum(const float* send, float* recv, std::size_t count) override {
    const std::vector<std::vector<float>> all = broadcastEach(send, count);
    const sum16::Slices slices(count, size());
    for (int s = 0; s < size(); ++s) addSliceInRingOrder(all, count, s, recv + slices.begin(s));
    counted(allreduceBytesSent(count, size()));  // what MPI would move: counted alike
  }
  void broadcast(float* data, std::size_t count, int root) override {
    rendezvous_->run(rank_, data, count, root);
    counted(broadcastBytesSent(count, size()));
  }

 private:
  std::shared_ptr<LoopbackRendezvous> rendezvous_;
  const int rank_;
};

}  // namespace poseidon
