#include "allreduce/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "allreduce/sum16.h"

#include "poseidon/errors.h"

namespace poseidon {

namespace {
// Block size of the owner's sum: the running sums stay in L1 while the P slices are added.
constexpr std::size_t kSumBlock = 1024;

// out[i] = ((from[0][i] + from[1][i]) + from[2][i]) + ...: rank order, the order the
// loopback communicator and the 16-bit path add in. `out` may be one of the `from` slices
// (in place): each block is read whole before it is written.
void addInRankOrder(const std::vector<const float*>& from, std::size_t n, float* out) {
  float acc[kSumBlock];
  for (std::size_t start = 0; start < n; start += kSumBlock) {
    const std::size_t len = std::min(kSumBlock, n - start);
    const float* f0 = from[0] + start;
    for (std::size_t i = 0; i < len; ++i) acc[i] = f0[i];
    for (std::size_t r = 1; r < from.size(); ++r) {
      const float* fr = from[r] + start;
      for (std::size_t i = 0; i < len; ++i) acc[i] += fr[i];
    }
    std::memcpy(out + start, acc, len * sizeof(float));
  }
}

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
  if (abandoned_) static_cast<void>(owner_sum_.release());  // MPI may still use them: leaked on purpose
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

// What MPI reads and writes during an fp32 allreduce by owner, counts and displacements
// included, kept across calls: a fresh receive buffer per bucket would fault its pages in
// every iteration. Leaked, never freed, once a call gave up on a collective MPI still holds.
struct MpiCommunicator::OwnerSumBuffers {
  std::unique_ptr<float[]> gathered;  // the other ranks' slices of this rank's, in rank order
  std::size_t capacity = 0;
  // Slice s of the buffer: slice_counts[s] floats from slice_displs[s] (the allgather's
  // layout); the alltoall sends the same slices but none to itself, and packs what it
  // receives in rank order.
  std::vector<int> slice_counts, slice_displs, send_counts, recv_counts, recv_displs;
};

MpiCommunicator::OwnerSumBuffers& MpiCommunicator::ownerSumBuffers(const sum16::Slices& slices) {
  if (owner_sum_ && abandoned_) static_cast<void>(owner_sum_.release());  // MPI may still use them
  if (!owner_sum_) owner_sum_ = std::make_unique<OwnerSumBuffers>();
  OwnerSumBuffers& b = *owner_sum_;
  const int own = static_cast<int>(slices.length(rank_));
  for (auto* v : {&b.slice_counts, &b.slice_displs, &b.send_counts, &b.recv_counts, &b.recv_displs}) v->resize(size_);
  for (int s = 0, at = 0; s < size_; ++s) {
    b.slice_counts[s] = static_cast<int>(slices.length(s));
    b.slice_displs[s] = static_cast<int>(slices.begin(s));
    b.send_counts[s] = s == rank_ ? 0 : b.slice_counts[s];
    b.recv_counts[s] = s == rank_ ? 0 : own;
    b.recv_displs[s] = at;
    at += b.recv_counts[s];
  }
  const std::size_t gathered = static_cast<std::size_t>(own) * static_cast<std::size_t>(size_ - 1);
  if (b.capacity < gathered) {
    b.gathered.reset(new float[gathered]);  // uninitialised: MPI writes all of it before it is read
    b.capacity = gathered;
  }
  return b;
}

void MpiCommunicator::allreduceSum(const float* send, float* recv, std::size_t count) {
  POSEIDON_ENFORCE(count <= static_cast<std::size_t>(INT_MAX), "one collective carries at most 2^31 floats");
  if (size_ == 1) {
    if (send != recv) std::memcpy(recv, send, count * sizeof(float));
    return;
  }
  const std::uint64_t bytes = allreduceBytesSent(count, size_);
  paced(bytes, &failure_);
  const sum16::Slices slices(count, size_);  // the same cut as the 16-bit path's, without scales
  OwnerSumBuffers& b = ownerSumBuffers(slices);
  MPI_Request request;
  check(MPI_Ialltoallv(send, b.send_counts.data(), b.slice_displs.data(), MPI_FLOAT, b.gathered.get(),
                       b.recv_counts.data(), b.recv_displs.data(), MPI_FLOAT, comm_, &request),
        "MPI_Ialltoallv");
  wait(request, "MPI_Ialltoallv (fp32 slices to their owners)");
  std::vector<const float*> from(size_);
  for (int r = 0; r < size_; ++r) from[r] = r == rank_ ? send + slices.begin(r) : b.gathered.get() + b.recv_displs[r];
  addInRankOrder(from, slices.length(rank_), recv + slices.begin(rank_));
  // Every owner's sum to every rank, in place: this rank's slice of `recv` is its own sum.
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, b.slice_counts.data(), b.slice_displs.data(),
                        MPI_FLOAT, comm_, &request),
        "MPI_Iallgatherv");
  wait(request, "MPI_Iallgatherv (the fp32 sums to every rank)");
  counted(bytes);
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
