// Byte counters of what a rank sends, per peer and per message type. Counted by the
// transport at send time, read by the CLI to report bytes per iteration.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/message.h"

namespace poseidon {

class TrafficCounters {
 public:
  void resize(int peers) {
    per_peer_ = std::vector<std::atomic<std::uint64_t>>(static_cast<std::size_t>(peers));
  }
  void countSend(int peer, MsgType type, std::uint64_t bytes) {
    if (static_cast<std::size_t>(peer) < per_peer_.size()) per_peer_[peer] += bytes;
    per_type_[static_cast<std::size_t>(type)] += bytes;
    total_ += bytes;
  }
  std::uint64_t sentTotal() const { return total_; }
  std::uint64_t sentTo(int peer) const { return per_peer_.at(peer); }
  std::uint64_t sentOfType(MsgType type) const { return per_type_[static_cast<std::size_t>(type)]; }

 private:
  std::vector<std::atomic<std::uint64_t>> per_peer_;
  std::array<std::atomic<std::uint64_t>, 6> per_type_{};
  std::atomic<std::uint64_t> total_{0};
};

}  // namespace poseidon
