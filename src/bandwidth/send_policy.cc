#include "bandwidth/send_policy.h"

#include "poseidon/options.h"

namespace poseidon {

SendOrder parseSendOrder(const std::string& text) {
  if (text == "priority") return SendOrder::kPriority;
  if (text == "fifo") return SendOrder::kFifo;
  throw OptionError("{send_order=" + text + "}: use 'priority' or 'fifo'");
}

}  // namespace poseidon
