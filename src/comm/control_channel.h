// Small collectives built from point-to-point control messages: allgather, broadcast,
// barrier. They run identically over every transport and are used where the job is
// quiescent: at start-up (agreement check, initial parameters), between epochs
// (evaluation) and at the end (digests). Each call takes the next sequence number, the
// same on every rank because every rank makes the same calls in the same order.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/message.h"
#include "comm/transport.h"
#include "common/wait.h"
#include "poseidon/collectives.h"

namespace poseidon {

class ControlChannel final : public Collectives {
 public:
  ControlChannel(Transport& transport, std::chrono::milliseconds timeout, const FailureState& failure);

  // Delivered by the dispatcher for every kControl message.
  void onMessage(Message message);

  std::vector<std::string> allgather(const std::string& mine, const std::string& what) override;
  std::string broadcast(const std::string& data, int root, const std::string& what) override;
  // Sent in bounded chunks.
  void broadcastBytes(void* data, std::size_t bytes, int root, const std::string& what) override;
  void barrier(const std::string& what) override;
  std::vector<double> allreduceSum(const std::vector<double>& mine, const std::string& what) override;

  // Largest payload a control message may carry.
  static constexpr std::size_t kMaxChunkBytes = 8u << 20;

 private:
  Message waitMessage(std::uint32_t seq, int source, const std::string& what,
                      std::chrono::milliseconds extra = std::chrono::milliseconds(0));
  // How much longer than rank 0 the others wait for an allgather's reply: half the
  // timeout, at most 3 s.
  std::chrono::milliseconds replyGrace() const { return std::min(timeout_ / 2, std::chrono::milliseconds(3000)); }
  void sendTo(int peer, std::uint32_t seq, const void* data, std::size_t bytes);

  Transport& transport_;
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
  std::uint32_t next_seq_ = 0;  // used by the calling thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::uint32_t, int>, Message> box_;  // guarded by mu_; (seq, source)
};

}  // namespace poseidon
