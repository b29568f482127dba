// What a rank's bandwidth manager did (the 2015 paper's send queue): reported by programs.
#pragma once

#include <cstdint>

namespace poseidon {

// What a node's send queue did: messages that crossed the network and how long they
// waited in the queue (for the window, the budget or more urgent messages).
struct SendQueueStats {
  std::uint64_t messages = 0;
  double wait_seconds = 0;  // summed over the messages
  double max_wait_seconds = 0;
};

}  // namespace poseidon
