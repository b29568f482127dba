#include "bandwidth/send_policy.h"

#include "common/names.h"
#include "poseidon/options.h"

namespace poseidon {

SendOrder parseSendOrder(const std::string& text) {
  static constexpr NameTable<SendOrder, 2> kSendOrders{{{SendOrder::kPriority, "priority"}, {SendOrder::kFifo, "fifo"}}};
  if (const SendOrder* order = valueIn(kSendOrders, text)) return *order;
  throw OptionError("{send_order=" + text + "}: use 'priority' or 'fifo'");
}

}  // namespace poseidon
