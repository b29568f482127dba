#include "option_flags.h"

#include <algorithm>

#include "poseidon/option_table.h"

namespace poseidon::app {

namespace {

// The value's shape in --help.
std::string typeName(const OptionSpec& spec) {
  switch (spec.kind) {
    case OptionKind::kBool:
      return spec.words ? std::string(spec.words).replace(std::string(spec.words).find('/'), 1, "|") : "";
    case OptionKind::kWhole: return "INT";
    case OptionKind::kReal: return "FLOAT";
    case OptionKind::kText: return "WORD";
    case OptionKind::kSeconds: return "SECONDS";
    case OptionKind::kRate: return "RATE";
    case OptionKind::kFlops: return "FLOP/S";
    case OptionKind::kDevices: return "N|host";
  }
  return "";
}

// One row as a flag of `cmd`: its help in the CLI's words, its default from Options{}, each
// value parsed by the table into `into` as it is read (a bool row: a flag that sets its
// non-default value).
CLI::Option* addRow(CLI::App* cmd, Options& into, const OptionSpec& spec) {
  const Options defaults;
  const OptionSpec* row = &spec;  // the table lives as long as the program
  const std::string help = sayOptions(spec.help, sayInCli);
  if (spec.kind == OptionKind::kBool && !spec.words) {
    const std::string value = optionText(spec, defaults) == "true" ? "false" : "true";
    return cmd->add_flag_callback(cliFlag(spec), [&into, row, value] { setOption(into, *row, value); }, help);
  }
  return cmd
      ->add_option_function<std::string>(
          cliFlag(spec), [&into, row](const std::string& text) { setOption(into, *row, text); }, help)
      ->default_str(optionText(spec, defaults))
      ->type_name(typeName(spec));
}

}  // namespace

void addOptionGroup(CLI::App* cmd, Options& into, const char* group) {
  for (const OptionSpec& spec : optionTable()) {
    if ((spec.fronts & kCliFront) && std::string(spec.group) == group) addRow(cmd, into, spec)->group(group);
  }
}

void addOptionFlags(CLI::App* cmd, Options& into, const std::vector<std::string>& names) {
  for (const std::string& name : names) addRow(cmd, into, *findOption(name));
}

std::string sayAsPlanFlag(const std::string& field, const std::string& value) {
  if (field == "shards" || field == "server_ranks") return value.empty() ? "--servers" : "--servers " + value;
  return sayInCli(field, value);
}

std::string messageWithFlags(const std::exception& e) {
  const auto* option = dynamic_cast<const OptionError*>(&e);
  return option ? option->in(sayInCli) : e.what();
}

}  // namespace poseidon::app
