#include "bandwidth/send_policy.h"

#include "poseidon/errors.h"

namespace poseidon {

SendOrder parseSendOrder(const std::string& text, const std::string& flag) {
  if (text == "priority") return SendOrder::kPriority;
  if (text == "fifo") return SendOrder::kFifo;
  throw InputError(detail::cat(flag, " must be 'priority' or 'fifo', not '", text, "'"));
}

const char* sendOrderName(SendOrder order) { return order == SendOrder::kPriority ? "priority" : "fifo"; }

}  // namespace poseidon
