#include "allreduce/mpi_communicator.h"

#include <climits>
#include <memory>
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

namespace {

// What MPI reads and writes during a 16-bit allreduce, counts and displacements included.
// The words are left uninitialised: each is written (encode, MPI, reduceSlice) before it
// is read, and zero-filling them cost as much as a conversion pass.
struct Sum16Buffers {
  std::unique_ptr<std::uint16_t[]> mine, gathered, sum;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

}  // namespace

void MpiCommunicator::allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count,
                                     sum16::Feedback* feedback) {
  const sum16::Slices slices(count, size_);
  const auto own = static_cast<int>(slices.words(rank_));
  POSEIDON_ENFORCE(slices.totalWords() <= static_cast<std::size_t>(INT_MAX) &&
                       static_cast<std::size_t>(own) * static_cast<std::size_t>(size_) <= static_cast<std::size_t>(INT_MAX),
                   "one 16-bit collective carries at most 2^31 values");
  const std::uint64_t bytes = allreduce16BytesSent(count, size_);
  paced(bytes, &failure_);
  // On the heap: a call that gives up leaves them to MPI, which may still use them (wait()).
  auto b = std::make_unique<Sum16Buffers>();
  try {
    // Rank s gets slice s of every rank's contribution, in rank order.
    b->mine.reset(new std::uint16_t[slices.totalWords()]);
    sum16::encode(format, send, slices, b->mine.get(), feedback != nullptr ? &feedback->sent : nullptr);
    b->send_counts.resize(size_);
    b->send_displs.resize(size_);
    b->recv_counts.assign(size_, own);
    b->recv_displs.resize(size_);
    for (int s = 0; s < size_; ++s) {
      b->send_counts[s] = static_cast<int>(slices.words(s));
      b->send_displs[s] = static_cast<int>(slices.offset(s));
      b->recv_displs[s] = s * own;
    }
    b->gathered.reset(new std::uint16_t[static_cast<std::size_t>(own) * size_]);
    MPI_Request request;
    check(MPI_Ialltoallv(b->mine.get(), b->send_counts.data(), b->send_displs.data(), MPI_UINT16_T,
                         b->gathered.get(), b->recv_counts.data(), b->recv_displs.data(), MPI_UINT16_T, comm_,
                         &request),
          "MPI_Ialltoallv");
    wait(request, "MPI_Ialltoallv (16-bit slices to their owners)");
    std::vector<const std::uint16_t*> from;
    for (int r = 0; r < size_; ++r) from.push_back(b->gathered.get() + static_cast<std::size_t>(r) * own);
    b->sum.reset(new std::uint16_t[own]);
    sum16::reduceSlice(format, from, slices.length(rank_), b->sum.get(),
                       sum16::Carried{feedback != nullptr ? &feedback->sum : nullptr, slices.begin(rank_)});
    // Every owner's rounded sum to every rank: the whole buffer's encoding, slices in order.
    check(MPI_Iallgatherv(b->sum.get(), own, MPI_UINT16_T, b->mine.get(), b->send_counts.data(),
                          b->send_displs.data(), MPI_UINT16_T, comm_, &request),
          "MPI_Iallgatherv");
    wait(request, "MPI_Iallgatherv (the 16-bit sums to every rank)");
  } catch (...) {
    if (abandoned_) b.release();  // deliberately leaked: MPI still holds them
    throw;
  }
  for (int s = 0; s < size_; ++s) {
    sum16::decodeSlice(format, b->mine.get() + slices.offset(s), slices.length(s), recv + slices.begin(s));
  }
  counted(bytes);
}

}  // namespace poseidon
