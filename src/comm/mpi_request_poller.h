// Completion of MPI requests that other threads issued, by the one thread that polls MPI.
//
// Every MPI_Test drives Open MPI's whole progress engine (every socket and every request of
// the process, not just the caller's), and a thread that polls on an oversubscribed host
// wakes every few tens of microseconds while a transfer is in flight. So the collectives'
// threads do not poll for themselves: they hand their requests to the transport's progress
// thread, which polls them with its own, and sleep until it reports them done. One poller
// per rank, not one per thread.
#pragma once

#include <mpi.h>

#include "common/wait.h"

namespace poseidon {

class MpiRequestPoller {
 public:
  enum class Outcome {
    kDone,        // the request completed (and is freed)
    kFailed,      // it completed with an error: `mpi_error` says which
    kGaveUp,      // `until` passed or `failure` was set: MPI still holds the request
    kStopped,     // the poller's thread ended before the request completed: MPI still holds it
    kNotPolling,  // no thread polls it (not started, or stopped first): still the caller's to poll
  };
  virtual ~MpiRequestPoller() = default;
  // Blocks until one of the outcomes. From any thread. Unless the outcome is kNotPolling the
  // request is the poller's for good (it keeps testing a request given up on, and frees it
  // once done): the caller's handle is stale and must not be tested, cancelled or freed.
  virtual Outcome await(MPI_Request request, Clock::time_point until, const FailureState& failure,
                        int& mpi_error) = 0;
};

}  // namespace poseidon
