// Communicators on a transport's collective channels (comm/collective_channel.h): the MPI
// one where the channel is an MPI communicator, the in-process one on the loopback
// transport's rendezvous. Their blocking calls end with a TimeoutError after `timeout`
// and watch `failure`.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "allreduce/communicator.h"
#include "comm/transport.h"

namespace poseidon {

class FailureState;

// Over all ranks of `transport`. Collective: every rank makes the same number, in the same order.
std::unique_ptr<Communicator> newCommunicator(Transport& transport, std::chrono::milliseconds timeout,
                                              const FailureState& failure);
// Over `members` (ranks, ascending) alone, ranked in that order: only they call it, each the
// same number of times in the same order.
std::unique_ptr<Communicator> newGroupCommunicator(Transport& transport, const std::vector<int>& members,
                                                   std::chrono::milliseconds timeout, const FailureState& failure);

}  // namespace poseidon
