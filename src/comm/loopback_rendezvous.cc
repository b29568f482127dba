#include "comm/loopback_rendezvous.h"

#include <cstring>

#include "common/wait.h"
#include "poseidon/errors.h"

namespace poseidon {

LoopbackRendezvous::LoopbackRendezvous(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), data_(size), count_(size), root_(size) {}

void LoopbackRendezvous::run(int rank, float* data, std::size_t count, int root) {
  std::unique_lock<std::mutex> lock(mu_);
  // The previous collective must be over for everybody before its slots are reused.
  waitFor(
      lock, cv_, [&] { return !draining_; }, timeout_, nullptr, "loopback collective: previous one to drain");
  data_[rank] = data;
  count_[rank] = count;
  root_[rank] = root;
  const std::uint64_t generation = generation_;
  if (++arrived_ == size_) {
    mismatch_ = false;
    for (int r = 1; r < size_; ++r) mismatch_ |= count_[r] != count_[0] || root_[r] != root_[0];
    if (!mismatch_) {
      for (int r = 0; r < size_; ++r) {
        if (r != root && count > 0) std::memcpy(data_[r], data_[root], count * sizeof(float));
      }
    }
    draining_ = true;
    ++generation_;
    cv_.notify_all();
  } else {
    waitFor(
        lock, cv_, [&] { return generation_ != generation; }, timeout_, nullptr,
        detail::cat("loopback collective: rank ", rank, " waiting for the others"));
  }
  const bool mismatch = mismatch_;
  if (++left_ == size_) {
    arrived_ = 0;
    left_ = 0;
    draining_ = false;
    cv_.notify_all();
  }
  if (mismatch) throw Error("loopback collective: the ranks called different collectives (order differs across ranks)");
}

}  // namespace poseidon
