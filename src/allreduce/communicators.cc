#include "allreduce/communicators.h"

#include "allreduce/loopback_communicator.h"
#include "allreduce/mpi_communicator.h"
#include "comm/mpi_channel.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

std::unique_ptr<Communicator> onChannel(CollectiveChannel channel, std::chrono::milliseconds timeout,
                                        const FailureState& failure) {
  if (channel.rendezvous) {
    auto comm = std::make_unique<LoopbackCommunicator>(channel.rendezvous, channel.rank);
    comm->countInto(channel.traffic);
    return comm;
  }
  if (!channel.mpi) throw CommError("this transport offers no channel for collectives (the allreduce scheme)");
  MpiChannel& mpi = *channel.mpi;
  std::unique_ptr<MpiCommunicator> comm;
  try {
    comm = std::make_unique<MpiCommunicator>(mpi.comm, timeout, failure);  // its own duplicate
  } catch (...) {
    if (mpi.owned) MPI_Comm_free(&mpi.comm);
    throw;
  }
  if (mpi.owned) MPI_Comm_free(&mpi.comm);
  comm->countInto(channel.traffic);
  comm->paceWith(channel.budget);
  comm->pollWith(channel.poller);
  return comm;
}

}  // namespace

std::unique_ptr<Communicator> newCommunicator(Transport& transport, std::chrono::milliseconds timeout,
                                              const FailureState& failure) {
  return onChannel(transport.newCollectiveChannel(nullptr, timeout), timeout, failure);
}

std::unique_ptr<Communicator> newGroupCommunicator(Transport& transport, const std::vector<int>& members,
                                                   std::chrono::milliseconds timeout, const FailureState& failure) {
  return onChannel(transport.newCollectiveChannel(&members, timeout), timeout, failure);
}

}  // namespace poseidon
