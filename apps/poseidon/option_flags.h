// The option table (include/poseidon/option_table.h) on the command line: the session's
// options as flags, and the core's option errors (OptionError) in the CLI's words.
#pragma once

#include <CLI/CLI.hpp>

#include <exception>
#include <string>
#include <vector>

#include "poseidon/options.h"

namespace poseidon::app {

// Every row the CLI shows in `group` ("Optimizer", "Schemes", "Network") as flags of `cmd`,
// in that help section: help, default and parser from the table, each value set into `into`
// as it is read.
void addOptionGroup(CLI::App* cmd, Options& into, const char* group);
// The rows `names` the same way, for a command that takes only some (`poseidon plan`).
void addOptionFlags(CLI::App* cmd, Options& into, const std::vector<std::string>& names);

// `poseidon plan`'s flag for an Options member (the option table's words, sayInCli), but
// --servers for the shards.
std::string sayAsPlanFlag(const std::string& field, const std::string& value);
// An error's message in the CLI's words: an OptionError's options as `poseidon train`'s flags.
std::string messageWithFlags(const std::exception& e);

}  // namespace poseidon::app
