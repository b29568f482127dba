// The bandwidth manager's queue: every outgoing message of a node waits here until the
// window (bytes handed to the network at once) and the budget (a TokenBucket) let it go,
// and leaves in priority order (lowest number first, then in the order queued) or in FIFO
// order. Messages to this rank itself, or to another rank of its node (the devices
// level), never touch the network and leave at once.
//
// Why a window: once MPI has a message, it goes out in MPI's order, so a queue that hands
// everything over at once orders nothing. With a window of a few KV pairs the network is
// kept busy and a lower layer's pair overtakes whatever of the upper layers still waits.
//
// Not thread-safe: the transport guards it with its own lock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "bandwidth/send_policy.h"
#include "bandwidth/token_bucket.h"

namespace poseidon {

template <typename Item>
class SendQueue {
 public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    Item item;
    int priority = 0;
    std::size_t bytes = 0;
    bool network = true;  // false: to this rank itself or a rank of its node
    Clock::time_point queued;
  };

  explicit SendQueue(SendOrder order) : order_(order) {}

  void push(Item item, int priority, std::size_t bytes, bool network, Clock::time_point now) {
    const std::int64_t rank = !network ? INT64_MIN : order_ == SendOrder::kPriority ? priority : 0;
    entries_.emplace(std::make_pair(rank, next_seq_++), Entry{std::move(item), priority, bytes, network, now});
  }
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }

  // The next message that may go at `now`, given the bytes already with the network, or
  // nothing. Charges the budget for it.
  std::optional<Entry> pop(std::size_t in_flight_bytes, std::size_t window_bytes, TokenBucket& budget,
                           Clock::time_point now) {
    if (entries_.empty()) return std::nullopt;
    auto head = entries_.begin();
    Entry& e = head->second;
    if (e.network) {
      // A message larger than the window goes alone.
      const bool fits = window_bytes == 0 || in_flight_bytes == 0 || in_flight_bytes + e.bytes <= window_bytes;
      if (!fits || budget.wait(now) > Clock::duration::zero()) return std::nullopt;
      budget.charge(nicBytes(e.bytes), now);
    }
    Entry out = std::move(e);
    entries_.erase(head);
    return out;
  }

  // Everything still queued, in the order it would have gone.
  std::vector<Entry> takeAll() {
    return takeIf([](const Item&) { return true; });
  }
  // Whether anything queued matches `pred`.
  template <typename Pred>
  bool any(Pred pred) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const auto& kv) { return pred(kv.second.item); });
  }
  // What is queued and matches `pred` (e.g. every message to a peer that left).
  template <typename Pred>
  std::vector<Entry> takeIf(Pred pred) {
    std::vector<Entry> taken;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (!pred(it->second.item)) {
        ++it;
        continue;
      }
      taken.push_back(std::move(it->second));
      it = entries_.erase(it);
    }
    return taken;
  }

 private:
  SendOrder order_;
  std::uint64_t next_seq_ = 0;
  std::map<std::pair<std::int64_t, std::uint64_t>, Entry> entries_;
};

}  // namespace poseidon
