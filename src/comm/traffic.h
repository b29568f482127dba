// Byte counters of what a rank sends, in total and per peer. Counted by the transport at
// send time (and by the communicators per collective call), read by the CLI to report bytes per iteration (per layer is
// counted by the syncers and the server, which know the layers).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace poseidon {

class TrafficCounters {
 public:
  void resize(int peers) { per_peer_ = std::vector<std::atomic<std::uint64_t>>(static_cast<std::size_t>(peers)); }
  void countSend(int peer, std::uint64_t bytes) {
    if (static_cast<std::size_t>(peer) < per_peer_.size()) per_peer_[peer] += bytes;
    total_ += bytes;
  }
  // A collective's bytes: the transport does not see them per peer.
  void countCollective(std::uint64_t bytes) { total_ += bytes; }
  std::uint64_t sentTotal() const { return total_; }
  std::uint64_t sentTo(int peer) const { return per_peer_.at(peer); }

 private:
  std::vector<std::atomic<std::uint64_t>> per_peer_;
  std::atomic<std::uint64_t> total_{0};
};

}  // namespace poseidon
