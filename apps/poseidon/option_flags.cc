#include "option_flags.h"

#include "poseidon/option_table.h"

namespace poseidon::app {

std::string sayAsPlanFlag(const std::string& field, const std::string& value) {
  if (field == "shards" || field == "server_ranks") return value.empty() ? "--servers" : "--servers " + value;
  return sayInCli(field, value);
}

std::string messageWithFlags(const std::exception& e) {
  const auto* option = dynamic_cast<const OptionError*>(&e);
  return option ? option->in(sayInCli) : e.what();
}

}  // namespace poseidon::app
