#include "option_flags.h"

#include <map>

#include "poseidon/options.h"

namespace poseidon::app {

namespace {

// The members whose flag is not "--" + the member's name with dashes.
const std::map<std::string, std::string>& otherFlags() {
  static const std::map<std::string, std::string> flags = {
      {"backward_passes_per_step", "--backward-passes"},
      {"gemm_flops", "--gflops"},
      {"lr_decay_iterations", "--lr-schedule"},
      {"node_memory", "--intra-node"},
      {"schedule_plan", "--profile FILE"},
      {"send_window_bytes", "--send-window"},
  };
  return flags;
}

std::string flagOf(const std::string& field) {
  const auto it = otherFlags().find(field);
  if (it != otherFlags().end()) return it->second;
  std::string flag = "--" + field;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

}  // namespace

std::string sayAsTrainFlag(const std::string& field, const std::string& value) {
  if (field == "wfbp") return "--no-wfbp";  // named only when off; a flag without a value
  if (field == "error_feedback") return "--error-feedback";  // named only when on
  return value.empty() ? flagOf(field) : flagOf(field) + " " + value;
}

std::string sayAsPlanFlag(const std::string& field, const std::string& value) {
  if (field == "shards" || field == "server_ranks") return value.empty() ? "--servers" : "--servers " + value;
  return sayAsTrainFlag(field, value);
}

std::string messageWithFlags(const std::exception& e) {
  const auto* option = dynamic_cast<const OptionError*>(&e);
  return option ? option->in(sayAsTrainFlag) : e.what();
}

}  // namespace poseidon::app
