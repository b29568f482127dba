// A Communicator over a duplicate of Poseidon's MPI communicator. Collectives are issued
// non-blocking (MPI_Iallreduce, MPI_Ibcast) and completed by polling MPI_Test with a short
// sleep between polls: a blocking MPI call busy-waits, and on an oversubscribed machine a
// spinning rank takes the core its neighbours compute on. Needs MPI_THREAD_MULTIPLE,
// since engine threads call MPI while the transport's progress thread does too.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>

#include "allreduce/communicator.h"
#include "common/wait.h"

namespace poseidon {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `parent`: every rank creates its communicators in the same order.
  MpiCommunicator(MPI_Comm parent, std::chrono::milliseconds timeout, const FailureState& failure);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool abandoned() const override { return abandoned_; }
  void allreduceSum(const float* send, float* recv, std::size_t count) override;
  void broadcast(float* data, std::size_t count, int root) override;
  // An MPI_Ialltoallv of the 16-bit slices to their owners, the owner's sum, an
  // MPI_Iallgatherv of the rounded sums (sum16.h).
  void allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count,
                      sum16::Feedback* feedback) override;

 private:
  void wait(MPI_Request& request, const char* what);
  void check(int rc, const char* call) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<bool> abandoned_{false};  // a call gave up on a request MPI still holds
  int rank_ = 0;
  int size_ = 1;
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
};

}  // namespace poseidon
