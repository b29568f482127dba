// What a transport hands the collectives layer to build a Communicator on
// (allreduce/communicators.h): how the ranks of one channel reach each other. The transport
// knows the wiring, the allreduce layer the arithmetic; neither includes the other's side.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/loopback_rendezvous.h"

namespace poseidon {

class MpiRequestPoller;
class TokenBucket;
class TrafficCounters;

struct CollectiveChannel {
  // MPI: the communicator of the channel's ranks, in its order, which the Communicator
  // duplicates; `owned`: the receiver frees it after that (a group's), else it is the
  // transport's own.
  MPI_Comm mpi = MPI_COMM_NULL;
  bool owned = false;
  // In-process (the loopback transport): the channel's meeting point and this rank in it.
  std::shared_ptr<LoopbackRendezvous> rendezvous;
  int rank = 0;
  // What the collectives count their bytes into, keep to (a sending budget) and wait through.
  TrafficCounters* traffic = nullptr;
  TokenBucket* budget = nullptr;
  MpiRequestPoller* poller = nullptr;
};

}  // namespace poseidon
