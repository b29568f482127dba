// The core's option errors (OptionError) in the CLI's words: each Options member as the
// flag that sets it.
#pragma once

#include <exception>
#include <string>

namespace poseidon::app {

// `poseidon plan`'s flag for an Options member (the option table's words, sayInCli), but
// --servers for the shards.
std::string sayAsPlanFlag(const std::string& field, const std::string& value);
// An error's message in the CLI's words: an OptionError's options as `poseidon train`'s flags.
std::string messageWithFlags(const std::exception& e);

}  // namespace poseidon::app
