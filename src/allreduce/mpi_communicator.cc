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
// Poll interval of a collective in flight: one ring step of a few MB takes milliseconds,
// so 20 us adds little latency and leaves the core to computation. Not backed off: a
// backoff to 160 us, side by side with this in one build, read 1.04x at 10 gbit and 0.97x
// at 1 gbit, within the lab's noise (docs/benchmarks/comm-poll-backoff-ab-direct.txt).
constexpr auto kPoll = std::chrono::microseconds(20);
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, std::chrono::milliseconds timeout, const FailureState& failure)
    : timeout_(timeout), failure_(failure) {
  MPI_Comm_rank(parent, &rank_);
  MPI_Comm_size(parent, &size_);
  // A collective over every rank: nonblocking, so a rank that never comes is a timeout.
  MPI_Request request;
  check(MPI_Comm_idup(parent, &comm_, &request), "MPI_Comm_idup");
  wait(request, "MPI_Comm_idup (a new communicator for the collectives)", deadline());
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

void MpiCommunicator::wait(MPI_Request& request, const char* what, Clock::time_point until) {
  if (poller_ != nullptr) {
    using Outcome = MpiRequestPoller::Outcome;
    int mpi_error = MPI_SUCCESS;
    const Outcome outcome = poller_->await(request, until, failure_, mpi_error);
    if (outcome != Outcome::kNotPolling) request = MPI_REQUEST_NULL;  // the poller's now
    if (outcome == Outcome::kDone) return;
    if (outcome == Outcome::kFailed) check(mpi_error, what);
    if (outcome != Outcome::kNotPolling) {
      abandoned_ = true;  // the request stays with MPI, and its buffers with it
      failure_.rethrowIfFailed();
      if (outcome == Outcome::kStopped) {
        throw CommError(detail::cat("rank ", rank_, ": ", what, ": the MPI progress thread stopped before it completed"));
      }
      throwTimeout(detail::cat("rank ", rank_, ": ", what), timeout_);
    }
  }
  int done = 0;
  while (true) {
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) abandoned_ = true;  // the request may still be pending: keep its buffers
    check(rc, "MPI_Test");
    if (done) return;
    // The request stays pending: MPI offers no way to take back a collective. The error
    // ends the run, and MPI_Abort or the launcher takes the other ranks down with it;
    // until then MPI may still write the buffers, which their owners keep (abandoned()).
    if (failure_.failed() || Clock::now() >= until) abandoned_ = true;
    failure_.rethrowIfFailed();
    if (Clock::now() >= until) throwTimeout(detail::cat("rank ", rank_, ": ", what), timeout_);
    std::this_thread::sleep_for(kPoll);
  }
}

namespace {
// A buffer that grows and is never shrunk or cleared: each call writes what it reads.
template <typename T>
struct Grown {
  std::unique_ptr<T[]> data;
  std::size_t capacity = 0;
  T* atLeast(std::size_t n) {
    n = std::max<std::size_t>(n, 1);  // never null: a GradientView's null fp32 means 16 bits
    if (capacity < n) {
      data.reset(new T[n]);  // uninitialised: MPI or the sum writes all of it before it is read
      capacity = n;
    }
    return data.get();
  }
};
}  // namespace

// What MPI reads and writes during an allreduce (the fp32 ring, the 16-bit owners'), counts and
// displacements included, kept across calls: fresh buffers per bucket would fault their
// pages in every iteration. Leaked, never freed, once a call gave up on a collective MPI
// still holds.
struct MpiCommunicator::OwnerSumBuffers {
  Grown<float> gathered;                 // fp32: the ring step's partial sums from the left
  Grown<float> stepped;                  // the fp32 step by owner: the ring's buffer (sums, then stepped values)
  Grown<std::uint16_t> mine16, gathered16, sum16;  // 16 bits: this rank's encoding, the others' slices, its sum or update
  owner16::Scratch scratch;              // the 16-bit step by owner's (never MPI's)
  // Slice s of the buffer: slice_counts[s] elements from slice_displs[s] (the allgather's
  // layout); the alltoall sends the same slices but none to itself, and packs what it
  // receives in rank order.
  std::vector<int> slice_counts, slice_displs, send_counts, recv_counts, recv_displs;

  // The layout for slices of count(s) elements at displ(s); returns this rank's count.
  template <typename Count, typename Displ>
  int layOut(int rank, int P, Count count, Displ displ) {
    for (auto* v : {&slice_counts, &slice_displs, &send_counts, &recv_counts, &recv_displs}) v->resize(P);
    const int own = static_cast<int>(count(rank));
    for (int s = 0, at = 0; s < P; ++s) {
      slice_counts[s] = static_cast<int>(count(s));
      slice_displs[s] = static_cast<int>(displ(s));
      send_counts[s] = s == rank ? 0 : slice_counts[s];
      recv_counts[s] = s == rank ? 0 : own;
      recv_displs[s] = at;
      at += recv_counts[s];
    }
    return own;
  }
};

MpiCommunicator::OwnerSumBuffers& MpiCommunicator::ownerSumBuffers() {
  if (owner_sum_ && abandoned_) static_cast<void>(owner_sum_.release());  // MPI may still use them
  if (!owner_sum_) owner_sum_ = std::make_unique<OwnerSumBuffers>();
  return *owner_sum_;
}

void MpiCommunicator::ringStep(const float* out, std::size_t out_count, float* in, std::size_t in_count,
                               const char* what, Clock::time_point until) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  try {
    check(MPI_Irecv(in, static_cast<int>(in_count), MPI_FLOAT, left, kRingTag, comm_, &requests[0]), "MPI_Irecv");
    check(MPI_Isend(out, static_cast<int>(out_count), MPI_FLOAT, right, kRingTag, comm_, &requests[1]), "MPI_Isend");
    wait(requests[0], what, until);
    wait(requests[1], what, until);
  } catch (...) {
    // The other request may still be pending (a failed receive leaves the send): its
    // buffers stay with MPI until the job ends, as an abandoned collective's do.
    abandoned_ = true;
    throw;
  }
}

void MpiCommunicator::ringReduceScatter(const float* send, float* acc, const sum16::Slices& slices,
                                        OwnerSumBuffers& b, Clock::time_point until) {
  const int P = size_;
  float* in = b.gathered.atLeast(slices.length(P - 1));  // the longest slice (the last)
  for (int k = 0; k + 1 < P; ++k) {
    // Step 0 sends this rank's own values of a slice; each later step the slice it summed
    // in the step before. Each slice is received once, so its own values are still `send`'s.
    const int out_slice = ringSlice(rank_ - k - 1), in_slice = ringSlice(rank_ - k - 2);
    const std::size_t n = slices.length(in_slice);
    ringStep((k == 0 ? send : acc) + slices.begin(out_slice), slices.length(out_slice), in, n,
             "the ring's reduce-scatter (fp32 partial sums to the right)", until);
    const float* mine = send + slices.begin(in_slice);
    float* sum = acc + slices.begin(in_slice);
    for (std::size_t i = 0; i < n; ++i) sum[i] = in[i] + mine[i];  // the ring's sum so far, then this rank's
  }
}

void MpiCommunicator::ringAllgather(float* acc, const sum16::Slices& slices, Clock::time_point until) {
  for (int k = 0; k + 1 < size_; ++k) {
    const int out_slice = ringSlice(rank_ - k), in_slice = ringSlice(rank_ - k - 1);
    ringStep(acc + slices.begin(out_slice), slices.length(out_slice), acc + slices.begin(in_slice),
             slices.length(in_slice), "the ring's allgather (finished slices to the right)", until);
  }
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
  OwnerSumBuffers& b = ownerSumBuffers();
  const auto until = deadline();  // after the pacing: the budget's wait is not the peers'
  ringReduceScatter(send, recv, slices, b, until);
  ringAllgather(recv, slices, until);
  counted(bytes);
}

void MpiCommunicator::allreduceStepped(const float* send, const PiecedBuffer& targets, const OwnerStep& step) {
  const std::size_t count = targets.count();
  POSEIDON_ENFORCE(count <= static_cast<std::size_t>(INT_MAX), "one collective carries at most 2^31 floats");
  if (size_ == 1) {
    step(0, count, {GradientView{send, {}}});  // its own gradient is the sum
    return;
  }
  const std::uint64_t bytes = allreduceBytesSent(count, size_);
  paced(bytes, &failure_);
  const sum16::Slices slices(count, size_);
  OwnerSumBuffers& b = ownerSumBuffers();
  // MPI reads and writes only `stepped`, never the targets (the model's tensors): a call
  // that gives up leaves MPI a buffer it owns, which is leaked with the others, while the
  // tensors may be freed. Open MPI 4.1's libnbc kept progressing an abandoned collective
  // into freed tensors (the address sanitizer's fault-injection case). The price is a copy
  // of the bucket through a buffer that stays in cache slice by slice.
  float* stepped = b.stepped.atLeast(count);
  const std::size_t mine = slices.begin(rank_), own = slices.length(rank_);
  const auto until = deadline();
  ringReduceScatter(send, stepped, slices, b, until);
  step(mine, own, {GradientView{stepped + mine, {}}});
  targets.copyTo(mine, own, stepped + mine);
  ringAllgather(stepped, slices, until);
  for (int s = 0; s < size_; ++s) {
    if (s != rank_) targets.copyFrom(slices.begin(s), slices.length(s), stepped + slices.begin(s));
  }
  counted(bytes);
}

void MpiCommunicator::broadcast(float* data, std::size_t count, int root) {
  POSEIDON_ENFORCE(count <= static_cast<std::size_t>(INT_MAX), "one collective carries at most 2^31 floats");
  MPI_Request request;
  paced(broadcastBytesSent(count, size_), &failure_);
  check(MPI_Ibcast(data, static_cast<int>(count), MPI_FLOAT, root, comm_, &request), "MPI_Ibcast");
  wait(request, "MPI_Ibcast", deadline());
  counted(broadcastBytesSent(count, size_));
}

std::vector<const std::uint16_t*> MpiCommunicator::ownerSlices16(WireFormat format, const float* send,
                                                                   const sum16::Slices& slices, OwnerSumBuffers& b,
                                                                   sum16::Feedback* feedback,
                                                                   Clock::time_point until) {
  const int own = b.layOut(rank_, size_, [&](int s) { return slices.words(s); }, [&](int s) { return slices.offset(s); });
  std::uint16_t* mine = b.mine16.atLeast(slices.totalWords());
  std::uint16_t* gathered = b.gathered16.atLeast(static_cast<std::size_t>(own) * static_cast<std::size_t>(size_ - 1));
  // Rank s gets slice s of every other rank's encoding, in rank order; its own it reads in place.
  sum16::encode(format, send, slices, mine, feedback != nullptr ? &feedback->sent : nullptr);
  MPI_Request request;
  check(MPI_Ialltoallv(mine, b.send_counts.data(), b.slice_displs.data(), MPI_UINT16_T, gathered, b.recv_counts.data(),
                       b.recv_displs.data(), MPI_UINT16_T, comm_, &request),
        "MPI_Ialltoallv");
  wait(request, "MPI_Ialltoallv (16-bit slices to their owners)", until);
  std::vector<const std::uint16_t*> from(size_);
  for (int r = 0; r < size_; ++r) from[r] = r == rank_ ? mine + slices.offset(r) : gathered + b.recv_displs[r];
  return from;
}

void MpiCommunicator::gather16(OwnerSumBuffers& b, int own, const char* what, Clock::time_point until) {
  MPI_Request request;
  check(MPI_Iallgatherv(b.sum16.data.get(), own, MPI_UINT16_T, b.mine16.data.get(), b.slice_counts.data(),
                        b.slice_displs.data(), MPI_UINT16_T, comm_, &request),
        "MPI_Iallgatherv");
  wait(request, what, until);
}

MpiCommunicator::Call16 MpiCommunicator::begin16(std::size_t count) {
  const sum16::Slices slices(count, size_);
  POSEIDON_ENFORCE(slices.totalWords() <= static_cast<std::size_t>(INT_MAX),
                   "one 16-bit collective carries at most 2^31 values");
  const std::uint64_t bytes = allreduce16BytesSent(count, size_);
  paced(bytes, &failure_);
  OwnerSumBuffers& b = ownerSumBuffers();
  return Call16{slices, bytes, b, deadline()};
}

void MpiCommunicator::allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count,
                                     sum16::Feedback* feedback) {
  auto [slices, bytes, b, until] = begin16(count);
  const auto from = ownerSlices16(format, send, slices, b, feedback, until);
  const int own = static_cast<int>(slices.words(rank_));
  sum16::reduceSlice(format, from, slices.length(rank_), b.sum16.atLeast(static_cast<std::size_t>(own)),
                     sum16::Carried{feedback != nullptr ? &feedback->sum : nullptr, slices.begin(rank_)});
  // Every owner's rounded sum to every rank: the whole buffer's encoding, slices in order.
  gather16(b, own, "MPI_Iallgatherv (the 16-bit sums to every rank)", until);
  for (int s = 0; s < size_; ++s) {
    sum16::decodeSlice(format, b.mine16.data.get() + slices.offset(s), slices.length(s), recv + slices.begin(s));
  }
  counted(bytes);
}

void MpiCommunicator::allreduceStepped16(WireFormat format, const float* send, const PiecedBuffer& targets,
                                         const OwnerStep& step, sum16::Feedback* feedback) {
  auto [slices, bytes, b, until] = begin16(targets.count());
  // As the fp32 step by owner, MPI reads and writes the communicator's buffers only: the
  // owner steps the targets between the two collectives, and each update received is added
  // onto them after the second. A call that gives up in the second leaves the owner's slice
  // stepped and the others not: the error ends the run, as the fp32 path's does.
  const auto from = ownerSlices16(format, send, slices, b, feedback, until);
  const std::size_t mine = slices.begin(rank_), n = slices.length(rank_);
  const int own = static_cast<int>(slices.words(rank_));
  owner16::stepOwnSlice(format, targets, mine, n, from, step, b.sum16.atLeast(static_cast<std::size_t>(own)),
                        sum16::Carried{feedback != nullptr ? &feedback->sum : nullptr, mine}, b.scratch);
  gather16(b, own, "MPI_Iallgatherv (the 16-bit updates to every rank)", until);
  for (int s = 0; s < size_; ++s) {
    if (s != rank_) owner16::addUpdate(format, b.mine16.data.get() + slices.offset(s), targets, slices.begin(s), slices.length(s));
  }
  counted(bytes);
}

}  // namespace poseidon
