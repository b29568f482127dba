// How a node's transport schedules what it sends (the 2015 paper's bandwidth manager).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "poseidon/send_stats.h"

namespace poseidon {

class Timeline;

enum class SendOrder {
  kPriority,  // what the next forward pass needs soonest first: lower layers ahead
  kFifo,      // in the order the sends were made (for comparison)
};
// "priority" or "fifo"; throws OptionError otherwise.
SendOrder parseSendOrder(const std::string& text);

struct SendPolicy {
  SendOrder order = SendOrder::kPriority;
  // The node's sending budget at its network interface, bytes/s; 0: none.
  double max_bytes_per_s = 0;
  // Bytes handed to the network at once, over all peers. A message waiting in the queue can
  // still be overtaken by a more urgent one; one handed over cannot. 0: no window (every
  // send goes to MPI as soon as the budget lets it, so the order hardly matters).
  std::size_t window_bytes = 4u << 20;
  // Records each message's wait in the queue when set.
  std::shared_ptr<Timeline> timeline;
};

}  // namespace poseidon
