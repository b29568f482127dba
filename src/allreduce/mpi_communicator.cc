#include "allreduce/mpi_communicator.h"

#include <climits>
#include <thread>
#include <vector>

#include "allreduce/sum16.h"

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

void MpiCommunicator::allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count) {
  const sum16::Slices slices(count, size_);
  POSEIDON_ENFORCE(slices.totalWords() <= static_cast<std::size_t>(INT_MAX), "one collective carries at most 2^31 values");
  const std::uint64_t bytes = allreduce16BytesSent(count, size_);
  paced(bytes, &failure_);
  // Rank s gets slice s of every rank's contribution, in rank order.
  std::vector<std::uint16_t> mine(slices.totalWords());
  sum16::encode(format, send, slices, mine.data());
  const int own = static_cast<int>(slices.words(rank_));
  std::vector<int> send_counts(size_), send_displs(size_), recv_counts(size_, own), recv_displs(size_);
  for (int s = 0; s < size_; ++s) {
    send_counts[s] = static_cast<int>(slices.words(s));
    send_displs[s] = static_cast<int>(slices.offset(s));
    recv_displs[s] = s * own;
  }
  std::vector<std::uint16_t> gathered(static_cast<std::size_t>(own) * size_);
  MPI_Request request;
  check(MPI_Ialltoallv(mine.data(), send_counts.data(), send_displs.data(), MPI_UINT16_T, gathered.data(),
                       recv_counts.data(), recv_displs.data(), MPI_UINT16_T, comm_, &request),
        "MPI_Ialltoallv");
  wait(request, "MPI_Ialltoallv (16-bit slices to their owners)");
  std::vector<const std::uint16_t*> from;
  for (int r = 0; r < size_; ++r) from.push_back(gathered.data() + static_cast<std::size_t>(r) * own);
  std::vector<std::uint16_t> sum(own);
  sum16::reduceSlice(format, from, slices.length(rank_), sum.data());
  // Every owner's rounded sum to every rank: the whole buffer's encoding, slices in order.
  check(MPI_Iallgatherv(sum.data(), own, MPI_UINT16_T, mine.data(), send_counts.data(), send_displs.data(),
                        MPI_UINT16_T, comm_, &request),
        "MPI_Iallgatherv");
  wait(request, "MPI_Iallgatherv (the 16-bit sums to every rank)");
  for (int s = 0; s < size_; ++s) {
    sum16::decodeSlice(format, mine.data() + slices.offset(s), slices.length(s), recv + slices.begin(s));
  }
  counted(bytes);
}

}  // namespace poseidon
