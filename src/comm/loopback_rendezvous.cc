#include "comm/loopback_rendezvous.h"

#include <cstring>

#include "common/wait.h"
#include "poseidon/errors.h"

namespace poseidon {

LoopbackRendezvous::LoopbackRendezvous(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), send_(size), recv_(size), count_(size), op_(size) {}

void LoopbackRendezvous::run(int rank, int op, const float* send, float* recv, std::size_t count, int root) {
  std::unique_lock<std::mutex> lock(mu_);
  // The previous collective must be over for everybody before its slots are reused.
  waitFor(
      lock, cv_, [&] { return !draining_; }, timeout_, nullptr, "loopback collective: previous one to drain");
  send_[rank] = send;
  recv_[rank] = recv;
  count_[rank] = count;
  op_[rank] = op;
  const std::uint64_t generation = generation_;
  if (++arrived_ == size_) {
    mismatch_ = false;
    for (int r = 1; r < size_; ++r) mismatch_ |= count_[r] != count_[0] || op_[r] != op_[0];
    if (!mismatch_) {
      std::vector<float> result(count);
      if (op == 0) {
        for (std::size_t i = 0; i < count; ++i) result[i] = send_[0][i];
        for (int r = 1; r < size_; ++r) {
          for (std::size_t i = 0; i < count; ++i) result[i] += send_[r][i];
        }
      } else {
        std::memcpy(result.data(), send_[root], count * sizeof(float));
      }
      for (int r = 0; r < size_; ++r) std::memcpy(recv_[r], result.data(), count * sizeof(float));
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
