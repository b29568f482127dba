// A Communicator over a duplicate of Poseidon's MPI communicator. Collectives are issued
// non-blocking (MPI_Isend/MPI_Irecv ring steps, MPI_Ialltoallv, MPI_Iallgatherv, MPI_Ibcast) and completed by polling
// MPI_Test with a short sleep between polls: a blocking MPI call busy-waits, and on an
// oversubscribed machine a spinning rank takes the core its neighbours compute on. With a
// poller (the transport's progress thread, mpi_request_poller.h) the calling thread does not
// poll at all: it hands the request over and sleeps until it completes. Needs
// MPI_THREAD_MULTIPLE, since engine threads call MPI while the transport's progress thread
// does too.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "allreduce/communicator.h"
#include "allreduce/sum16.h"
#include "comm/mpi_request_poller.h"
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
  // Completes this communicator's requests from here on (it must outlive the communicator's
  // calls); until then, and whenever it does not poll, the calling thread polls them itself.
  void pollWith(MpiRequestPoller* poller) { poller_ = poller; }
  // A ring in `recv`: the reduce-scatter, after which this rank's slice holds its ring-order
  // sum (ring_order.h), then the allgather; 2 (P-1)/P of the buffer sent per rank in
  // 2 (P-1) steps, in place or not. A ring rather than the owners' all-to-all the 16-bit path
  // takes: at 100 mbit it carried 10.07 MB/s of 12.5 where the all-to-all carried 7.58
  // (docs/design.md). Not MPI_Iallreduce: Open MPI 4.1's libnbc takes Rabenseifner's
  // algorithm at 4+ ranks, whose first step copies the whole send buffer (~0.18 core-s of
  // resnet50's iteration on 4 ranks, docs/benchmarks), its binomial one (not
  // bandwidth-optimal) for MPI_IN_PLACE, and the order of its additions depends on the
  // algorithm and the rank count.
  void allreduceSum(const float* send, float* recv, std::size_t count) override;
  // The ring's reduce-scatter in a staging buffer of the communicator's, the owner's step
  // from its slice's sum, then the ring's allgather of the stepped slices, copied into the
  // targets.
  void allreduceStepped(const float* send, const PiecedBuffer& targets, const OwnerStep& step) override;
  void broadcast(float* data, std::size_t count, int root) override;
  // An MPI_Ialltoallv of the 16-bit slices to their owners, the owner's sum in rank order,
  // an MPI_Iallgatherv of the rounded sums (sum16.h): the values are rounded once each
  // before any addition, which a ring's partial sums would not keep.
  void allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count,
                      sum16::Feedback* feedback) override;
  // The same alltoall, the owner's step from the slices' fp32 sum (step_by_owner.h), an
  // MPI_Iallgatherv of the owners' 16-bit updates, each added onto the targets.
  void allreduceStepped16(WireFormat format, const float* send, const PiecedBuffer& targets, const OwnerStep& step,
                          sum16::Feedback* feedback) override;

 private:
  struct OwnerSumBuffers;
  // The owner sums' buffers (fresh ones after an abandoned call).
  OwnerSumBuffers& ownerSumBuffers();
  // A 16-bit call of `count` values, begun: its size checked, its bytes paced (and counted
  // by the caller once done), its buffers, and its deadline after the pacing.
  struct Call16 {
    sum16::Slices slices;
    std::uint64_t bytes;
    OwnerSumBuffers& b;
    Clock::time_point until;
  };
  Call16 begin16(std::size_t count);
  // The ring (fp32): one step sends `out_count` floats from `out` to the right neighbour and
  // receives `in_count` into `in` from the left one. Each TCP connection then carries bulk
  // data one way only, so Open MPI's rendezvous handshakes never queue behind the other
  // direction's bulk in a capped link's buffer, as they do in an all-to-all (docs/design.md).
  void ringStep(const float* out, std::size_t out_count, float* in, std::size_t in_count, const char* what,
                Clock::time_point until);
  // P-1 steps after which this rank's slice of `acc` holds the ring-order sum (ring_order.h)
  // of every rank's `send`; the others but the left neighbour's hold partial sums (that one
  // is left unwritten). `acc` may be `send` (in place).
  void ringReduceScatter(const float* send, float* acc, const sum16::Slices& slices, OwnerSumBuffers& b,
                         Clock::time_point until);
  // P-1 steps after which every slice of `acc` holds its owner's.
  void ringAllgather(float* acc, const sum16::Slices& slices, Clock::time_point until);
  int ringSlice(int s) const { return ((s % size_) + size_) % size_; }
  static constexpr int kRingTag = 7;
  // The 16-bit alltoall of `send`'s encoded slices to their owners (b laid out for 16-bit
  // slices on the way); the encoded slices of this rank's share, in rank order.
  std::vector<const std::uint16_t*> ownerSlices16(WireFormat format, const float* send, const sum16::Slices& slices,
                                                  OwnerSumBuffers& b, sum16::Feedback* feedback,
                                                  Clock::time_point until);
  // The owners' encoded 16-bit slices (`own` words of this rank's from b.sum16) to every
  // rank, into b.mine16, slices in order.
  void gather16(OwnerSumBuffers& b, int own, const char* what, Clock::time_point until);
  // Waits until `request` completes (through the poller, else polling it here); past
  // `until` it throws the timeout. One call's
  // collectives share one deadline, so a call gives up after --timeout, not once per step.
  void wait(MPI_Request& request, const char* what, Clock::time_point until);
  Clock::time_point deadline() const { return Clock::now() + timeout_; }
  void check(int rc, const char* call) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<bool> abandoned_{false};  // a call gave up on a request MPI still holds
  MpiRequestPoller* poller_ = nullptr;  // completes the requests, if set
  std::unique_ptr<OwnerSumBuffers> owner_sum_;  // the owner sums' (fp32, stepped, 16-bit), kept across calls
  int rank_ = 0;
  int size_ = 1;
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
};

}  // namespace poseidon
