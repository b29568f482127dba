// A group of ranks that runs collectives, one object per communicator (an MPI_Comm_dup
// over MPI, a rendezvous over the loopback transport). Collectives on one communicator
// must be called in the same order on every rank, one at a time; different communicators
// are independent, so C of them can carry C collectives at once.
#pragma once

#include <cstddef>

namespace poseidon {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // recv[i] = sum over ranks of send[i], for `count` floats; send == recv sums in place.
  virtual void allreduceSum(const float* send, float* recv, std::size_t count) = 0;
  // data = root's data on every rank.
  virtual void broadcast(float* data, std::size_t count, int root) = 0;
};

}  // namespace poseidon
