// What a transport hands the collectives layer to build a Communicator on
// (allreduce/communicators.h): how the ranks of one channel reach each other. The transport
// knows the wiring, the allreduce layer the arithmetic; neither includes the other's side.
#pragma once

#include <memory>

#include "comm/loopback_rendezvous.h"

namespace poseidon {

struct MpiChannel;  // comm/mpi_channel.h
class MpiRequestPoller;
class TokenBucket;
class TrafficCounters;

struct CollectiveChannel {
  // MPI transports: the channel's MPI communicator.
  std::shared_ptr<MpiChannel> mpi;
  // In-process (the loopback transport): the channel's meeting point and this rank in it.
  std::shared_ptr<LoopbackRendezvous> rendezvous;
  int rank = 0;
  // What the collectives count their bytes into, keep to (a sending budget) and wait through.
  TrafficCounters* traffic = nullptr;
  TokenBucket* budget = nullptr;
  MpiRequestPoller* poller = nullptr;
};

}  // namespace poseidon
