// The options checked and parsed once (options.cc): the session's enums and KVStore
// settings for what Options says in words.
#pragma once

#include "allreduce/kvstore.h"
#include "bandwidth/send_policy.h"
#include "common/half.h"
#include "coordinator/scheme_planner.h"
#include "poseidon/options.h"

namespace poseidon {

struct CheckedOptions {
  SchemeMode mode = SchemeMode::kAuto;
  CostRule rule = CostRule::kBytes;
  SendOrder send_order = SendOrder::kPriority;
  KVStoreOptions kvstore;  // without its timeline, which the session adds
  WireFormat wire = WireFormat::kFp32;
  // How SFB layers' factors travel: the wire, or fp32 with error feedback (factors carry
  // no residual; the allreduce layers' sums do, kvstore.error_feedback).
  WireFormat factor_wire = WireFormat::kFp32;
};

// validate(), keeping what it parsed; throws OptionError.
CheckedOptions checkOptions(const Options& options);

// What the schedule rule's simulation assumes of a run (also `poseidon plan`'s check);
// throws OptionError.
void checkScheduleRule(const Options& options, SchemeMode mode);

}  // namespace poseidon
