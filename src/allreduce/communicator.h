// A group of ranks that runs collectives, one object per communicator (an MPI_Comm_dup
// over MPI, a rendezvous over the loopback transport). Collectives on one communicator
// must be called in the same order on every rank, one at a time; different communicators
// are independent, so C of them can carry C collectives at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allreduce/step_by_owner.h"
#include "bandwidth/token_bucket.h"
#include "comm/traffic.h"
#include "common/half.h"

namespace poseidon {

namespace sum16 {
struct Feedback;
}


// What one rank sends in an allreduce of `count` floats over P ranks: 2 (P-1)/P of the
// buffer, a ring's figure (reduce-scatter, then allgather: MpiCommunicator's; slices as
// even as integers allow, so a rank may send a few floats more or less). The lab's NIC counters
// confirm the mean (test mpi.lab_nic_bytes).
inline std::uint64_t allreduceBytesSent(std::size_t count, int P) {
  return P <= 1 ? 0 : static_cast<std::uint64_t>(2.0 * (P - 1) / P * static_cast<double>(count) * sizeof(float));
}
// A 16-bit allreduce (sum16.h): an alltoall and an allgather of the buffer in 16 bits, each
// (P-1)/P of it per rank, with a 4-byte scale per slice.
inline std::uint64_t allreduce16BytesSent(std::size_t count, int P) {
  return P <= 1 ? 0
                : static_cast<std::uint64_t>(2.0 * (P - 1) / P * (static_cast<double>(count) + 2.0 * P) *
                                             sizeof(std::uint16_t));
}
// A broadcast delivers the buffer to P-1 ranks: (P-1)/P of it per rank on average.
inline std::uint64_t broadcastBytesSent(std::size_t count, int P) {
  return P <= 1 ? 0 : static_cast<std::uint64_t>(1.0 * (P - 1) / P * static_cast<double>(count) * sizeof(float));
}

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // recv[i] = sum over ranks of send[i] in the ring's order (ring_order.h: slice s from rank
  // s+1's value around to rank s's), for `count` floats; send == recv sums in place.
  virtual void allreduceSum(const float* send, float* recv, std::size_t count) = 0;
  // data = root's data on every rank.
  virtual void broadcast(float* data, std::size_t count, int root) = 0;
  // recv = the sum over ranks of send with 16-bit values on the wire (`format` bf16 or
  // fp16; sum16.h: two roundings, the same bits on every rank); send == recv in place.
  // `feedback` (or null): the buffer's residuals, carried into this call and kept from it
  // (error feedback). This generic version sends every rank's whole buffer to every rank;
  // MpiCommunicator's moves half a ring's bytes.
  virtual void allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count,
                              sum16::Feedback* feedback);
  // The step by owner (issue 38): rank s gets the ring-order sum (ring_order.h) of slice s
  // of every rank's `send` (the slices of sum16::Slices, no scales), calls `step` on it,
  // which updates slice s of `targets` from it, and sends the updated slice to every rank. So each rank steps a P-th of
  // the buffer, and the ranks' targets end equal, bit for bit, with a ring's bytes moved
  // (the updated values in place of the sums). This generic version sends every rank's `send`
  // to every rank (broadcastEach), steps its own slice from their ring-order sum, and
  // broadcasts it from its owner; MPI's is a ring's reduce-scatter and allgather through a
  // buffer of its own, copied into the targets (MPI never holds the targets, which the
  // caller may free).
  virtual void allreduceStepped(const float* send, const PiecedBuffer& targets, const OwnerStep& step);
  // The step by owner on a 16-bit wire (`format` bf16 or fp16; step_by_owner.h): rank s
  // gets slice s of every rank's rounded `send` (sum16.h's alltoall, `feedback->sent` as
  // there), steps it from their fp32 rank-order sum, and sends its update (new minus old)
  // rounded, with `feedback->sum` as that rounding's residual on the owner; every rank's
  // targets end as old + the rounded update, bit for bit, with a 16-bit allreduce's bytes.
  // This generic version broadcasts as allreduceSum16's; MPI's moves only the owners' shares.
  virtual void allreduceStepped16(WireFormat format, const float* send, const PiecedBuffer& targets,
                                  const OwnerStep& step, sum16::Feedback* feedback);
  // The sum `wire` asks for: allreduceSum in fp32 (no rounding but the additions'), else
  // allreduceSum16.
  void sum(WireFormat wire, const float* send, float* recv, std::size_t count, sum16::Feedback* feedback = nullptr) {
    if (wire == WireFormat::kFp32) {
      allreduceSum(send, recv, count);
    } else {
      allreduceSum16(wire, send, recv, count, feedback);
    }
  }
  // The step by owner `wire` asks for: allreduceStepped in fp32, else allreduceStepped16.
  void stepped(WireFormat wire, const float* send, const PiecedBuffer& targets, const OwnerStep& step,
               sum16::Feedback* feedback = nullptr) {
    if (wire == WireFormat::kFp32) {
      allreduceStepped(send, targets, step);
    } else {
      allreduceStepped16(wire, send, targets, step, feedback);
    }
  }
  // True once a call gave up (an error elsewhere, a timeout) on a collective MPI still
  // holds: its buffers must then outlive their owners until the job ends.
  virtual bool abandoned() const { return false; }

  // Each completed call adds what it moved from this rank (above) to `traffic`, the
  // transport's counters, so bytes per iteration include the collectives.
  void countInto(TrafficCounters* traffic) { traffic_ = traffic; }
  // Each call first waits until the node's sending budget (the transport's) allows what it
  // will send: a collective is not cut into the send queue's messages, but it keeps to the
  // same budget on average.
  void paceWith(TokenBucket* budget) { budget_ = budget; }

 protected:
  // While one lives, the calls it wraps count and pace nothing (a collective made of others
  // counts once, as itself).
  class Uncounted {
   public:
    explicit Uncounted(Communicator& c) : c_(c), traffic_(c.traffic_), budget_(c.budget_) {
      c.traffic_ = nullptr;
      c.budget_ = nullptr;
    }
    ~Uncounted() {
      c_.traffic_ = traffic_;
      c_.budget_ = budget_;
    }
    Uncounted(const Uncounted&) = delete;
    Uncounted& operator=(const Uncounted&) = delete;

   private:
    Communicator& c_;
    TrafficCounters* traffic_;
    TokenBucket* budget_;
  };

  // Every rank's `count` floats of `send`, by rank, each broadcast from its rank, uncounted:
  // the generic collectives' way for communicators without point-to-point (the loopback).
  std::vector<std::vector<float>> broadcastEach(const float* send, std::size_t count);

  void counted(std::uint64_t bytes) {
    if (traffic_) traffic_->countCollective(bytes);
  }
  void paced(std::uint64_t bytes, const FailureState* failure) {
    if (budget_ != nullptr && bytes > 0) budget_->acquire(nicBytes(bytes), failure);
  }

 private:
  TrafficCounters* traffic_ = nullptr;
  TokenBucket* budget_ = nullptr;
};

}  // namespace poseidon
