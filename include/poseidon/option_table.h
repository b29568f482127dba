// The session's options as one table: each Options member's row says how it is written as
// text, which front ends show it, under which flag or keyword, and its help. The CLI's
// flags, the Python keywords (signature, defaults, docstring, conversion), the pybind
// attributes of Options and the CLI's run report are all read from it; Options{} gives
// every default. Adding an option: its member in Options (type, default, why) and its row
// in src/client/option_table.cc, then the code that uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "poseidon/options.h"

namespace poseidon {

// How an option's value is written as text: on the command line, as a Python value
// converted to text, in a report.
enum class OptionKind {
  kBool,     // true or false (or the row's two words, e.g. memory/messages)
  kWhole,    // a whole number
  kReal,     // a number
  kText,     // a word the core checks (scheme, wire, ...)
  kSeconds,  // a duration in seconds (the member holds milliseconds)
  kRate,     // bytes/s: "1gbit", "125MB" or a number; 0: none
  kFlops,    // flop/s: a number, or with k, M, G or T ("50G"); 0: measure
  kDevices,  // ranks per node, or "host" (the member holds 0)
};

// Which front ends show an option (a bit each).
enum OptionFront : unsigned { kNoFront = 0, kCliFront = 1, kPythonFront = 2, kBothFronts = 3 };

using OptionMember =
    std::variant<bool Options::*, int Options::*, std::int64_t Options::*, std::uint64_t Options::*,
                 float Options::*, double Options::*, std::string Options::*, std::chrono::milliseconds Options::*>;

struct OptionSpec {
  const char* name;  // the Options member, the Python keyword, the report's key
  OptionMember member;
  OptionKind kind;
  unsigned fronts;  // OptionFront bits
  const char* group;  // the CLI's help section ("Schemes"), the docstring's too
  // Said in each front's words: "{field}" and "{field=value}" as the CLI's flags or
  // Python's keywords (sayInCli, sayInPython).
  const char* help;
  const char* flag = nullptr;  // the CLI's, if not "--" + name with dashes; a bool's sets its non-default
  const char* words = nullptr;  // a kBool's two words, "true-word/false-word" ("memory/messages")
  const char* python_words = nullptr;  // how Python sets one it has no keyword for ("mode='gradient'")
  const char* cli_words = nullptr;  // how the CLI sets one it has no flag for ("--lr-schedule")
  bool server_only = false;  // only the parameter servers do it (Python's mode "auto": server)
};

// Every option, in the CLI's help order. Options members missing from it: schedule_plan (a
// callback; the fronts set it from a profile file).
const std::vector<OptionSpec>& optionTable();
// The row of the member `name`, or nullptr.
const OptionSpec* findOption(const std::string& name);

// The value as text, as setOption takes it ("true", "0.01", "120", "host", ...).
std::string optionText(const OptionSpec& spec, const Options& options);
// Sets the member from text; throws OptionError naming it ("{staleness=x}: give a whole number").
void setOption(Options& options, const OptionSpec& spec, const std::string& text);

// The CLI's flag of a row ("--backward-passes").
std::string cliFlag(const OptionSpec& spec);
// An option (and its value, "" for none) in each front's words, for OptionError::in and help
// texts: "--lr 0", "--no-wfbp", "--intra-node messages"; "staleness=1", "wfbp=False",
// "the optimizer's lr=0", "mode='gradient'". A name outside the table is said by the rule
// ("--checkpoint-every", "checkpoint_every").
std::string sayInCli(const std::string& field, const std::string& value);
std::string sayInPython(const std::string& field, const std::string& value);

}  // namespace poseidon
