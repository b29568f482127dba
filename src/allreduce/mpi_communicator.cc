#include "allreduce/mpi_communicator.h"

#include <climits>
#include <thread>

#include "poseidon/errors.h"

namespace poseidon {

namespace {
// Poll interval of a collective in flight: one ring step of a few MB takes milliseconds,
// so 20 us adds little latency and leaves the core to computation.
constexpr auto kPoll = std::chrono::microseconds(20);
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, std::chrono::milliseconds timeout, const FailureState& failure)
    : timeout_(timeout), failure_(failure) {
  MPI_Comm_rank(parent, &rank_);
  MPI_Comm_size(parent, &size_);
  // A collective over every rank: nonblocking, so a rank that never comes is a timeout.
  MPI_Request request;
  check(MPI_Comm_idup(parent, &comm_, &request), "MPI_Comm_idup");
  wait(request, "MPI_Comm_idup (a new communicator for the collectives)");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL && !abandoned_) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check(int rc, const char* call) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(detail::cat(call, " failed on rank ", rank_, ": ", std::string(text, len)));
}

void MpiCommunicator::wait(MPI_Request& request, const char* what) {
  const auto deadline = Clock::now() + timeout_;
  int done = 0;
  while (true) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    // The request stays pending: MPI offers no way to take back a collective. The error
    // ends the run, and MPI_Abort or the launcher takes the other ranks down with it;
    // until then MPI may still write the buffers, which their owners keep (abandoned()).
    if (failure_.failed() || Clock::now() >= deadline) abandoned_ = true;
    failure_.rethrowIfFailed();
    if (Clock::now() >= deadline) throwTimeout(detail::cat("rank ", rank_, ": ", what), timeout_);
    std::this_thread::sleep_for(kPoll);
  }
}

void MpiCommunicator::allreduceSum(const float* send, float* recv, std::size_t count) {
  POSEIDON_ENFORCE(count <= static_cast<std::size_t>(INT_MAX), "one collective carries at most 2^31 floats");
  MPI_Request request;
  paced(allreduceBytesSent(count, size_), &failure_);
  check(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_,
                       &request),
        "MPI_Iallreduce");
  wait(request, "MPI_Iallreduce");
  counted(allreduceBytesSent(count, size_));
}

void MpiCommunicator::broadcast(float* data, std::size_t count, int root) {
  POSEIDON_ENFORCE(count <= static_cast<std::size_t>(INT_MAX), "one collective carries at most 2^31 floats");
  MPI_Request request;
  paced(broadcastBytesSent(count, size_), &failure_);
  check(MPI_Ibcast(data, static_cast<int>(count), MPI_FLOAT, root, comm_, &request), "MPI_Ibcast");
  wait(request, "MPI_Ibcast");
  counted(broadcastBytesSent(count, size_));
}

}  // namespace poseidon
