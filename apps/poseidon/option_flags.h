// The core's option errors (OptionError) in the CLI's words: each Options member as the
// flag that sets it.
#pragma once

#include <exception>
#include <string>

namespace poseidon::app {

// `poseidon train`'s flag for an Options member, with its value as typed ("--lr 0").
std::string sayAsTrainFlag(const std::string& field, const std::string& value);
// `poseidon plan`'s: the same but for the shards, which it calls servers.
std::string sayAsPlanFlag(const std::string& field, const std::string& value);
// An error's message in the CLI's words: an OptionError's options as `poseidon train`'s flags.
std::string messageWithFlags(const std::exception& e);

}  // namespace poseidon::app
