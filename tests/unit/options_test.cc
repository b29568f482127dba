// Options: the core's one check (each bad option one OptionError naming it, said in a
// front end's words), and the run-configuration string (start-up agreement, resume).
#include "poseidon/options.h"

#include <gtest/gtest.h>

#include <string>

#include "allreduce/kvstore.h"
#include "checkpoint/checkpointer.h"
#include "client/checked_options.h"
#include "common/half.h"
#include "common/names.h"
#include "coordinator/scheme_planner.h"

namespace poseidon {
namespace {

// The default options' resume string; tests/python/test_api_saved.py expects the same from Python.
const char* const kDefaultResume =
    "config/2 lr=0.01 momentum=0.9 wd=0 lr_decay=0 gradient_mode=0 batch=32 passes=1 buffers=broadcast "
    "staleness=0 server_ranks=0 shards=0 pair=2097152 fusion=2097152";

Options withPlan() {
  Options o;
  o.schedule_plan = [](const ModelInfo&, std::int64_t, int, int, double, double) { return std::vector<std::string>{}; };
  return o;
}

// The OptionError validate() throws for `o` (fails the test if none).
OptionError errorOf(const Options& o) {
  try {
    validate(o);
  } catch (const OptionError& e) {
    return e;
  }
  ADD_FAILURE() << "no OptionError";
  return OptionError("");
}

std::string asFlag(const std::string& field, const std::string& value) {
  return "--" + field + (value.empty() ? "" : " " + value);
}

TEST(Options, DefaultsPass) {
  EXPECT_NO_THROW(validate(Options{}));
  EXPECT_NO_THROW(validate(withPlan()));
}

TEST(Options, EachBadOptionNamesItsField) {
  struct Case {
    void (*bad)(Options&);
    const char* field;
    const char* says;  // in the member's words (what())
  };
  const Case cases[] = {
      {[](Options& o) { o.lr = 0; }, "lr", "lr=0: the learning rate must be positive"},
      {[](Options& o) { o.momentum = 1; }, "momentum", "momentum=1: use [0, 1)"},
      {[](Options& o) { o.weight_decay = -1; }, "weight_decay", "weight_decay=-1: must not be negative"},
      {[](Options& o) { o.batch = 0; }, "batch", "batch=0: must be positive"},
      {[](Options& o) { o.backward_passes_per_step = 0; }, "backward_passes_per_step", "must be at least 1"},
      {[](Options& o) { o.buffers = "sometimes"; }, "buffers", "buffers=sometimes: use broadcast or average"},
      {[](Options& o) { o.scheme = "carrier-pigeon"; }, "scheme", "scheme=carrier-pigeon: use ps"},
      {[](Options& o) { o.cost_model = "vibes"; }, "cost_model", "cost_model=vibes: use bytes"},
      {[](Options& o) { o.send_order = "lifo"; }, "send_order", "send_order=lifo: use 'priority' or 'fifo'"},
      {[](Options& o) { o.kvstore = "ring"; }, "kvstore", "kvstore=ring: use funnel"},
      {[](Options& o) { o.kvstore_comms = 4; }, "kvstore_outstanding", "is below kvstore_comms=4"},
      {[](Options& o) { o.timeout = std::chrono::milliseconds(0); }, "timeout", "timeout must be positive"},
      {[](Options& o) { o.max_bandwidth = 200; }, "max_bandwidth", "under 1mbit"},
      {[](Options& o) { o.staleness = -1; }, "staleness", "staleness=-1: must not be negative"},
      {[](Options& o) {
         o.staleness = 1;
         o.straggler_timeout = std::chrono::milliseconds(5);
       },
       "staleness", "staleness and straggler_timeout are two answers"},
      {[](Options& o) { o.straggler_timeout = o.timeout; }, "straggler_timeout", "shorter than timeout"},
      {[](Options& o) {
         o.gradient_mode = true;
         o.staleness = 2;
       },
       "gradient_mode", "drop staleness"},
      {[](Options& o) { o.cost_model = "schedule"; }, "cost_model", "give schedule_plan"},
  };
  for (const Case& c : cases) {
    Options o;
    c.bad(o);
    const OptionError e = errorOf(o);
    EXPECT_EQ(e.field(), c.field) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
  }
}

TEST(Options, FrontEndsSayTheOptionsInTheirOwnWords) {
  Options o;
  o.staleness = 1;
  o.straggler_timeout = std::chrono::milliseconds(5);
  EXPECT_EQ(errorOf(o).in(asFlag), "--staleness and --straggler_timeout are two answers to slow workers: use one");
  o = Options{};
  o.lr = -2;
  EXPECT_EQ(errorOf(o).in(asFlag), "--lr -2: the learning rate must be positive");
}

TEST(Options, TheScheduleRuleIsCheckedInOnePlace) {
  const auto says = [](void (*change)(Options&), const char* what) {
    Options o = withPlan();
    o.cost_model = "schedule";
    change(o);
    const std::string text = errorOf(o).what();
    EXPECT_NE(text.find("does not work with " + std::string(what)), std::string::npos) << text;
  };
  says([](Options& o) { o.scheme = "ps"; }, "scheme=ps (use scheme=auto)");
  says([](Options& o) { o.wfbp = false; }, "wfbp=false");
  says([](Options& o) { o.send_order = "fifo"; }, "send_order=fifo");
  says([](Options& o) { o.shards = 2; }, "shards");
  says([](Options& o) { o.server_ranks = 1; }, "server_ranks");
  says([](Options& o) { o.staleness = 1; }, "staleness");
  says([](Options& o) { o.wire = "bf16"; }, "wire=bf16 (use cost_model=bytes or cost_model=time)");
  Options ok = withPlan();
  ok.cost_model = "schedule";
  EXPECT_NO_THROW(validate(ok));
}

TEST(Options, ParsedOnce) {
  Options o;
  o.kvstore = "chained";
  o.kvstore_comms = 3;
  o.send_order = "fifo";
  const CheckedOptions c = checkOptions(o);
  EXPECT_EQ(c.kvstore.type, KVStoreType::kChained);
  EXPECT_EQ(c.kvstore.communicators, 3);
  EXPECT_EQ(c.send_order, SendOrder::kFifo);
  EXPECT_EQ(c.mode, SchemeMode::kAuto);
}

TEST(Options, ErrorFeedbackKeepsAllreduceSumsIn16BitsAndFactorsInFp32) {
  Options o;
  o.wire = "bf16";
  const CheckedOptions plain = checkOptions(o);
  EXPECT_EQ(plain.kvstore.wire, WireFormat::kBf16);
  EXPECT_FALSE(plain.kvstore.error_feedback);
  EXPECT_EQ(plain.factor_wire, WireFormat::kBf16);
  o.error_feedback = true;
  o.scheme = "allreduce";  // was refused before allreduce sums carried residuals
  const CheckedOptions fed = checkOptions(o);
  EXPECT_EQ(fed.kvstore.wire, WireFormat::kBf16);
  EXPECT_TRUE(fed.kvstore.error_feedback);
  EXPECT_EQ(fed.factor_wire, WireFormat::kFp32) << "factors carry no residual: fp32 with error feedback";
}

TEST(RunConfiguration, ResumeKeepsWhatMakesTheResumeExact) {
  Options o;
  // Server mode: the allreduce layers may step by owner (their momentum sharded).
  const std::string fp32_server = std::string(kDefaultResume) + kShardedAllreduceField;
  EXPECT_EQ(runConfiguration(o, ConfigurationUse::kResume), fp32_server);
  // What may change on resume leaves it as it is.
  o.timeout = std::chrono::milliseconds(1000);
  o.start_iteration = 40;
  o.scheme = "ps";
  o.kvstore = "funnel";
  o.agreement = "epochs=3";
  EXPECT_EQ(runConfiguration(o, ConfigurationUse::kResume), fp32_server);
  // What the arithmetic depends on changes it.
  o.staleness = 2;
  EXPECT_NE(runConfiguration(o, ConfigurationUse::kResume), fp32_server);
  // Error feedback's residuals are in the checkpoint: on or off is kept.
  Options feedback;
  feedback.wire = "bf16";
  feedback.error_feedback = true;
  EXPECT_EQ(runConfiguration(feedback, ConfigurationUse::kResume),
            std::string(kDefaultResume) + " error_feedback=on" + kShardedAllreduceField);
}

TEST(RunConfiguration, ShardedAllreduceMomentumResumesOnlyWhereItIsSharded) {
  CheckpointInfo info;
  info.folder = "ck/iter-00000010";
  info.ranks = 2;
  const std::string sharded = runConfiguration(Options{}, ConfigurationUse::kResume);
  Options bf16;
  bf16.wire = "bf16";
  EXPECT_EQ(runConfiguration(bf16, ConfigurationUse::kResume), sharded) << "a 16-bit wire steps by owner too";
  Options gradient;
  gradient.gradient_mode = true;
  const std::string replicated = runConfiguration(gradient, ConfigurationUse::kResume);
  EXPECT_EQ(replicated.find(kShardedAllreduceField), std::string::npos) << "gradient mode keeps no momentum by owner";
  // Whole momentum (a checkpoint of an earlier build, or of its 16-bit wire's replicated
  // step: the same settings without the field) resumes the step by owner.
  info.config = kDefaultResume;
  EXPECT_NO_THROW(Checkpointer::checkCompatible(info, sharded, 2));
  // Sharded momentum resumes only a run that steps by owner.
  info.config = sharded;
  EXPECT_NO_THROW(Checkpointer::checkCompatible(info, sharded, 2));
  try {
    Checkpointer::checkCompatible(info, replicated, 2);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sharded by owner"), std::string::npos) << e.what();
  }
}

TEST(RunConfiguration, StartHoldsEverythingTheRanksShare) {
  Options o;
  o.agreement = "epochs=3";
  o.start_iteration = 40;
  const std::string start = runConfiguration(o, ConfigurationUse::kStart);
  EXPECT_EQ(start.rfind(kDefaultResume, 0), 0u) << start;  // the resume fields first
  for (const char* field : {" scheme=auto", " kvstore=concurrent/2/2", " start=40", " | epochs=3"}) {
    EXPECT_NE(start.find(field), std::string::npos) << field << " in " << start;
  }
}

TEST(RunConfiguration, GradientModeStartNamesNoServerSgd) {
  // The workers' own optimizer steps: the core's lr is a default, and a mismatch message
  // that quoted it ("lr=0.01" beside an optimizer at 0.05) would mislead.
  Options o;
  o.gradient_mode = true;
  const std::string start = runConfiguration(o, ConfigurationUse::kStart);
  for (const char* field : {" lr=", " momentum=", " wd=", " lr_decay="}) {
    EXPECT_EQ(start.find(field), std::string::npos) << field << " in " << start;
  }
  EXPECT_NE(runConfiguration(o, ConfigurationUse::kResume).find(" lr=0.01"), std::string::npos)
      << "checkpoints keep recording it";
}

TEST(RunConfiguration, AResumeWithAnotherSettingIsRefusedClearly) {
  CheckpointInfo info;
  info.folder = "ck/iter-00000010";
  info.ranks = 2;
  info.config = runConfiguration(Options{}, ConfigurationUse::kResume);
  EXPECT_NO_THROW(Checkpointer::checkCompatible(info, info.config, 2));
  Options other;
  other.lr = 0.5f;
  try {
    Checkpointer::checkCompatible(info, runConfiguration(other, ConfigurationUse::kResume), 2);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("other settings"), std::string::npos) << text;
    EXPECT_NE(text.find("lr=0.01"), std::string::npos) << text;
    EXPECT_NE(text.find("lr=0.5"), std::string::npos) << text;
  }
  // A checkpoint from before this format: said so, not compared.
  info.config = "fcnet: fc1/fc[10x784] | workers=2 batch=32";
  try {
    Checkpointer::checkCompatible(info, runConfiguration(Options{}, ConfigurationUse::kResume), 2);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("older Poseidon"), std::string::npos) << e.what();
  }
}

// Every enum spelled as a word goes through one table: each name parses back to its value.
TEST(NameTables, EveryNameParsesBackAndListsInOrder) {
  for (auto m : {SchemeMode::kPS, SchemeMode::kSFB, SchemeMode::kAuto, SchemeMode::kFactorPush, SchemeMode::kAllreduce}) {
    EXPECT_EQ(parseSchemeMode(schemeModeName(m)), m);
  }
  for (auto r : {CostRule::kBytes, CostRule::kTime, CostRule::kSchedule}) EXPECT_EQ(parseCostRule(costRuleName(r)), r);
  for (auto k : {KVStoreType::kFunnel, KVStoreType::kConcurrent, KVStoreType::kChained}) {
    EXPECT_EQ(parseKVStoreType(kvstoreTypeName(k)), k);
  }
  for (auto w : {WireFormat::kFp32, WireFormat::kBf16, WireFormat::kFp16}) EXPECT_EQ(parseWireFormat(wireFormatName(w)), w);
  constexpr NameTable<int, 3> table{{{1, "one"}, {2, "two"}, {3, "three"}}};
  EXPECT_EQ(namesIn(table), "one, two or three");
  EXPECT_STREQ(nameIn(table, 4), "?");
  EXPECT_EQ(valueIn(table, "four"), nullptr);
  EXPECT_THROW(parseSchemeMode("ring"), OptionError);
}

}  // namespace
}  // namespace poseidon
