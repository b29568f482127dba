// The option table: every row's text reads back as its value, names and flags are unique,
// bad text is one OptionError naming the option, and each front says options in its words.
#include "poseidon/option_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace poseidon {
namespace {

std::string errorOf(const OptionSpec& spec, const std::string& text) {
  Options o;
  try {
    setOption(o, spec, text);
  } catch (const OptionError& e) {
    return e.in(sayInCli);
  }
  ADD_FAILURE() << spec.name << " took " << text;
  return "";
}

TEST(OptionTable, EveryDefaultReadsBackAsItself) {
  const Options defaults;
  for (const OptionSpec& spec : optionTable()) {
    Options o;
    setOption(o, spec, optionText(spec, defaults));
    EXPECT_EQ(optionText(spec, o), optionText(spec, defaults)) << spec.name;
  }
}

TEST(OptionTable, NamesFlagsAndHelpAreWrittenOnce) {
  std::set<std::string> names, flags;
  for (const OptionSpec& spec : optionTable()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    if (spec.fronts & kCliFront) EXPECT_TRUE(flags.insert(cliFlag(spec)).second) << cliFlag(spec);
    EXPECT_GT(std::string(spec.help).size(), 10u) << spec.name;
    // Every "{field}" in a help names a row (or the schedule plan, which fronts set from a file).
    sayOptions(spec.help, [&](const std::string& field, const std::string&) {
      EXPECT_TRUE(findOption(field) || field == "schedule_plan") << spec.name << " cites " << field;
      return field;
    });
  }
  EXPECT_EQ(findOption("no_such_option"), nullptr);
}

TEST(OptionTable, TextOfEachKindParses) {
  Options o;
  setOption(o, *findOption("max_bandwidth"), "200mbit");
  EXPECT_DOUBLE_EQ(o.max_bandwidth, 25e6);
  setOption(o, *findOption("gemm_flops"), "50G");
  EXPECT_DOUBLE_EQ(o.gemm_flops, 50e9);
  setOption(o, *findOption("timeout"), "2.5");
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(2500));
  setOption(o, *findOption("devices_per_node"), "host");
  EXPECT_EQ(o.devices_per_node, 0);
  EXPECT_EQ(optionText(*findOption("devices_per_node"), o), "host");
  setOption(o, *findOption("node_memory"), "messages");
  EXPECT_FALSE(o.node_memory);
  setOption(o, *findOption("lr"), "0.1");
  EXPECT_EQ(o.lr, 0.1f);
  EXPECT_EQ(optionText(*findOption("lr"), o), "0.1");
}

TEST(OptionTable, BadTextIsOneErrorNamingTheOption) {
  EXPECT_EQ(errorOf(*findOption("staleness"), "1.5"), "--staleness 1.5: give a whole number");
  EXPECT_EQ(errorOf(*findOption("kvstore_comms"), "99999999999"), "--kvstore-comms 99999999999: out of range");
  EXPECT_EQ(errorOf(*findOption("start_iteration"), "-1"), "--start-iteration -1: give a whole number");
  EXPECT_EQ(errorOf(*findOption("node_memory"), "disk"), "--intra-node disk: use memory or messages");
  EXPECT_EQ(errorOf(*findOption("gemm_flops"), "50Q"), "--gemm-flops 50Q: give flop/s such as 50G or 5e10");
  EXPECT_EQ(errorOf(*findOption("timeout"), "soon"), "--timeout soon: give a number");
}

TEST(OptionTable, EachFrontSaysOptionsInItsWords) {
  EXPECT_EQ(sayInCli("backward_passes_per_step", "0"), "--backward-passes 0");
  EXPECT_EQ(sayInCli("wfbp", "false"), "--no-wfbp");
  EXPECT_EQ(sayInCli("lr_decay_iterations", ""), "--lr-schedule");
  EXPECT_EQ(sayInCli("schedule_plan", ""), "--profile FILE (or --emulate-compute FILE)");
  EXPECT_EQ(sayInPython("wfbp", "maybe"), "wfbp=maybe");  // a bad value is said, not parsed
  EXPECT_EQ(sayInPython("gradient_mode", "false"), "gradient_mode=False");
  EXPECT_EQ(sayInCli("checkpoint_every", "-1"), "--checkpoint-every -1");
  EXPECT_EQ(sayInPython("wfbp", "false"), "wfbp=False");
  EXPECT_EQ(sayInPython("error_feedback", ""), "error_feedback=True");
  EXPECT_EQ(sayInPython("gradient_mode", ""), "mode='gradient'");
  EXPECT_EQ(sayInPython("lr", "0"), "the optimizer's lr=0");
  EXPECT_EQ(sayInPython("staleness", "-1"), "staleness=-1");
}

}  // namespace
}  // namespace poseidon
