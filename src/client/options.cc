// The one check of Options and the one run-configuration string (include/poseidon/options.h).
// Messages name options as "{field}" or "{field=value}" (OptionError): the CLI says them as
// its flags, Python as its keywords, a C++ user reads the member names.
#include <algorithm>
#include <sstream>

#include "client/checked_options.h"

namespace poseidon {

namespace {

// "{field=value}", an option and its value in a message.
template <typename T>
std::string opt(const char* field, const T& value) {
  return detail::cat("{", field, "=", value, "}");
}

// The update rule and the batch.
void checkOptimizer(const Options& o) {
  if (o.lr <= 0.0f) throw OptionError(opt("lr", o.lr) + ": the learning rate must be positive");
  if (o.momentum < 0.0f || o.momentum >= 1.0f) throw OptionError(opt("momentum", o.momentum) + ": use [0, 1)");
  if (o.weight_decay < 0.0f) throw OptionError(opt("weight_decay", o.weight_decay) + ": must not be negative");
  if (o.lr_decay_iterations < 0) throw OptionError("{lr_decay_iterations} must not be negative (0: a constant lr)");
  if (o.batch <= 0) throw OptionError(opt("batch", o.batch) + ": must be positive");
  if (o.backward_passes_per_step < 1) {
    throw OptionError(opt("backward_passes_per_step", o.backward_passes_per_step) + ": must be at least 1");
  }
  if (o.buffers != "broadcast" && o.buffers != "average") {
    throw OptionError(opt("buffers", o.buffers) + ": use broadcast or average");
  }
}

// Sizes, rates and waits.
void checkNetwork(const Options& o) {
  if (o.timeout.count() <= 0) throw OptionError("{timeout} must be positive");
  if (o.fusion_bytes < 0) throw OptionError(opt("fusion_bytes", o.fusion_bytes) + ": must not be negative");
  if (o.send_window_bytes < 0) {
    throw OptionError(opt("send_window_bytes", o.send_window_bytes) + ": must not be negative (0: no window)");
  }
  // Below 1 mbit a single KV pair takes over 16 s: surely a unit slip ("200" for "200mbit").
  if (o.max_bandwidth < 0 || (o.max_bandwidth > 0 && o.max_bandwidth < 125e3)) {
    throw OptionError(detail::cat("{max_bandwidth} of ", o.max_bandwidth,
                                  " bytes/s is under 1mbit: give a rate with its unit, e.g. 200mbit"));
  }
  if (o.bandwidth < 0) throw OptionError("{bandwidth} must not be negative (0: measure)");
  if (o.gemm_flops < 0) throw OptionError("{gemm_flops} must not be negative (0: measure)");
  // Under a megaflop per second no CPU or GPU runs: surely a unit slip ("50" for "50G").
  if (o.gemm_flops > 0 && o.gemm_flops < 1e6) {
    throw OptionError(detail::cat("{gemm_flops} of ", o.gemm_flops,
                                  " flop/s is under a megaflop: give a rate with its unit, e.g. 50G"));
  }
  if (o.devices_per_node < 0) {
    throw OptionError(opt("devices_per_node", o.devices_per_node) + ": give ranks per node (1: flat; 0: by host)");
  }
}

// SSP, straggler dropping and gradient mode.
void checkSlowWorkers(const Options& o, SchemeMode mode) {
  if (o.staleness < 0) throw OptionError(opt("staleness", o.staleness) + ": must not be negative");
  if (o.straggler_timeout.count() < 0) throw OptionError("{straggler_timeout} must not be negative");
  if (o.staleness > 0 && o.straggler_timeout.count() > 0) {
    throw OptionError("{staleness} and {straggler_timeout} are two answers to slow workers: use one");
  }
  if (o.straggler_timeout.count() > 0 && o.straggler_timeout >= o.timeout) {
    throw OptionError("{straggler_timeout} must be shorter than {timeout}, or no step would ever go ahead");
  }
  if (o.gradient_mode && (o.straggler_timeout.count() > 0 || o.staleness > 0 || mode == SchemeMode::kFactorPush)) {
    throw OptionError(
        "{gradient_mode} (a local optimizer such as Adam) works with BSP and the ps, sfb, allreduce and auto "
        "schemes; drop {staleness}, {straggler_timeout} or {scheme=factor-push}, or use server-side SGD");
  }
}

KVStoreOptions kvstoreOptions(const Options& o) {
  KVStoreOptions kv{parseKVStoreType(o.kvstore), o.kvstore_comms, o.kvstore_outstanding, o.timeout};
  kv.validate();
  return kv;
}

}  // namespace

// The schedule rule simulates BSP with WFBP in priority order, a shard on every node, for
// scheme auto: a run without them would train a plan chosen for another system.
void checkScheduleRule(const Options& o, SchemeMode mode) {
  const std::string what = mode != SchemeMode::kAuto         ? opt("scheme", o.scheme) + " (use {scheme=auto})"
                           : !o.wfbp                         ? std::string("{wfbp=false}")
                           : o.send_order != "priority"      ? opt("send_order", o.send_order)
                           : o.server_ranks > 0              ? std::string("{server_ranks}")
                           : o.shards > 0                    ? std::string("{shards}")
                           : o.staleness > 0                 ? std::string("{staleness}")
                           : o.straggler_timeout.count() > 0 ? std::string("{straggler_timeout}")
                           // A session's schedule plan simulates fp32 (`poseidon plan --wire` can do 16 bits).
                           : o.wire != "fp32" ? opt("wire", o.wire) + " (use {cost_model=bytes} or {cost_model=time})"
                                              : std::string();
  if (!what.empty()) {
    throw OptionError(
        "{cost_model=schedule} simulates BSP with WFBP in priority order and a shard on every node; it does not "
        "work with " +
        what);
  }
}

CheckedOptions checkOptions(const Options& o) {
  CheckedOptions c;
  c.mode = parseSchemeMode(o.scheme);
  c.rule = parseCostRule(o.cost_model);
  c.send_order = parseSendOrder(o.send_order);
  checkOptimizer(o);
  checkNetwork(o);
  checkSlowWorkers(o, c.mode);
  c.kvstore = kvstoreOptions(o);
  c.wire = parseWireFormat(o.wire);
  if (c.wire != WireFormat::kFp32 && c.mode == SchemeMode::kFactorPush) {
    throw OptionError(opt("wire", o.wire) + " halves gradients, SFB's factors and allreduce sums; " +
                      opt("scheme", o.scheme) + "'s factors to the shards stay fp32: use {scheme=sfb} or {wire=fp32}");
  }
  checkErrorFeedback(c.wire, o.error_feedback);
  // Allreduce buckets carry their residuals too (sum16::Feedback); SFB's factors cannot
  // (factorWireOf), so auto's cost model counts them at fp32.
  c.kvstore.wire = c.wire;
  c.kvstore.error_feedback = o.error_feedback;
  c.factor_wire = factorWireOf(c.wire, o.error_feedback);
  if (c.rule == CostRule::kSchedule) {
    checkScheduleRule(o, c.mode);
    // Only a run's measured layer times can answer (Options::schedule_plan).
    if (!o.schedule_plan) {
      throw OptionError(
          "{cost_model=schedule} simulates iterations from measured layer times: give {schedule_plan} (a profile "
          "an earlier run wrote)");
    }
  }
  return c;
}

void validate(const Options& options) { static_cast<void>(checkOptions(options)); }

int parseDevicesPerNode(const std::string& text) {
  if (text == "host") return 0;
  const bool digits = !text.empty() && text.size() <= 6 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int d = digits ? std::stoi(text) : 0;
  if (d < 1) {
    throw OptionError(opt("devices_per_node", text) + ": give a number of ranks per node (1: flat) or host");
  }
  return d;
}

void checkCheckpointOptions(const std::string& dir, std::int64_t every) {
  if (every < 0) throw OptionError(opt("checkpoint_every", every) + ": give 0 (never) or a positive number of iterations");
  if (every > 0 && dir.empty()) throw OptionError("{checkpoint_every} needs {checkpoint_dir}, the folder to save in");
}

// One list of fields for both uses. kResume keeps what makes a resumed run continue the
// saved one exactly; what may change between the two runs stays out:
//   kept:  lr, momentum, weight_decay, lr_decay (the update rule: a linear decay's length
//          is the run's, so a run under it cannot be lengthened), gradient_mode (where the
//          optimizer state lives), batch and passes (each step's gradient, the data
//          position), buffers, staleness (which updates a read sees), server_ranks, shards
//          and pair (how the state is cut across the rank files), fusion (the allreduce
//          sums' grouping, and so MPI's order of additions), error_feedback (its residuals
//          are state records), allreduce_momentum (sharded by the step by owner: what each
//          rank's momentum records hold);
//   out:   the plan's inputs (scheme, cost_model, bandwidth, gflops, and wire, staleness
//          and straggler_timeout where they change the plan: the session compares the plan
//          itself), how messages travel (wfbp, kvstore, devices_per_node and
//          node_memory: the session compares the nodes it found; the send order and
//          budget; wire: it changes each step's rounding only),
//          timeouts (straggler_timeout included), start_iteration (the checkpoint's),
//          replicas_equal (how the start makes them equal), and the front end's agreement
//          (each front end adds its own).
std::string runConfiguration(const Options& o, ConfigurationUse use) {
  const bool all = use == ConfigurationUse::kStart;
  std::ostringstream s;
  s << kConfigurationFormat;
  const auto field = [&](const char* name, const auto& value, bool resume) {
    if (all || resume) s << ' ' << name << '=' << value;
  };
  // The servers' SGD: in gradient mode the core's defaults, not what the loop's optimizer
  // holds (it steps itself), so a start-up mismatch message does not name them. A resume
  // still compares them, as checkpoints record them.
  if (!all || !o.gradient_mode) {
    field("lr", o.lr, true);
    field("momentum", o.momentum, true);
    field("wd", o.weight_decay, true);
    field("lr_decay", o.lr_decay_iterations, true);
  }
  field("gradient_mode", o.gradient_mode, true);
  field("batch", o.batch, true);
  field("passes", o.backward_passes_per_step, true);
  field("buffers", o.buffers, true);
  field("staleness", o.staleness, true);
  field("server_ranks", o.server_ranks, true);
  field("shards", o.shards, true);
  field("pair", o.kv_pair_bytes, true);
  field("fusion", o.fusion_bytes, true);
  // Named only when on, so checkpoints from before it stay resumable.
  if (o.error_feedback) field("error_feedback", "on", true);
  // kShardedAllreduceField: where the allreduce layers may step by owner, on any wire (on a
  // node's leaders they do not, and their whole momentum resumes either way).
  if (!o.gradient_mode) s << kShardedAllreduceField;
  field("scheme", o.scheme, false);
  field("cost_model", o.cost_model, false);
  field("bandwidth", o.bandwidth, false);
  field("gflops", o.gemm_flops, false);
  field("wfbp", o.wfbp, false);
  field("wire", o.wire, false);
  field("kvstore", detail::cat(o.kvstore, "/", o.kvstore_comms, "/", o.kvstore_outstanding), false);
  field("devices_per_node", o.devices_per_node, false);
  field("node_memory", o.node_memory, false);
  field("straggler_ms", o.straggler_timeout.count(), false);
  field("start", o.start_iteration, false);
  field("replicas_equal", o.replicas_equal, false);
  if (all) s << " | " << o.agreement;
  return s.str();
}

}  // namespace poseidon
