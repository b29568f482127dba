#include "poseidon/runtime.h"

#include <cstdio>

#include "comm/control_channel.h"
#include "comm/job_channel.h"
#include "comm/mpi_context.h"
#include "comm/mpi_transport.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {
}  // namespace

Runtime::Runtime(int* argc, char*** argv)
    : mpi_(std::make_unique<MpiContext>(argc, argv)),
      transport_(std::make_unique<MpiTransport>(*mpi_, kMaxPayloadBytes)) {}

Runtime::~Runtime() {
  transport_->stop();
  if (!transport_->drained()) {
    std::fprintf(stderr,
                 "poseidon: rank %d: messages to other ranks still undelivered %lld s after the end (a peer stalled "
                 "or its link went down); ending the job\n",
                 mpi_->rank(), static_cast<long long>(MpiTransport::kDrainTimeout.count()));
    mpi_->abortJob(3);  // MPI_Finalize would wait for them forever
  }
  transport_.reset();
  mpi_.reset();
}

int Runtime::rank() const { return mpi_->rank(); }
int Runtime::size() const { return mpi_->size(); }
Transport& Runtime::transport() { return *transport_; }
std::unique_ptr<Transport> Runtime::newTransport() {
  // A communicator of its own: a message the last session sent late (its peer had already
  // stopped listening) must not reach the next one, which starts right after it (mode
  // "auto" moving onto the servers) and would take it for its own.
  return std::make_unique<MpiTransport>(*mpi_, kMaxPayloadBytes, MpiTransport::OwnCommunicator{});
}
std::unique_ptr<Collectives> Runtime::newCollectives(std::chrono::milliseconds timeout) {
  // Its progress thread may run beside a session's: MPI must allow calls from both.
  if (!mpi_->threadMultiple()) {
    throw CommError("this MPI library does not provide MPI_THREAD_MULTIPLE, which collectives beside a session need");
  }
  // Its own communicator: a session's transport, on the job's, may be alive beside it.
  return std::make_unique<JobChannel>(
      std::make_unique<MpiTransport>(*mpi_, kMaxPayloadBytes, MpiTransport::OwnCommunicator{}), timeout);
}
void Runtime::abortJob(int code) { mpi_->abortJob(code); }

}  // namespace poseidon
