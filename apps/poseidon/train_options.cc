#include "train_options.h"

#include <cstdlib>
#include <fstream>

#include "coordinator/scheme_planner.h"
#include "coordinator/units.h"
#include "poseidon/errors.h"
#include "profile/compute_profile.h"
#include "simulate/profiled_model.h"
#include "threads.h"

namespace poseidon::app {

namespace {

// Output files are refused up front if they exist: nothing already written is overwritten,
// and a finished run is not lost to a name clash at its end.
void requireNewFile(const char* flag, const std::string& path) {
  if (!path.empty() && std::ifstream(path).good()) {
    throw InputError(detail::cat(flag, " ", path, " already exists; remove it or choose another name"));
  }
}

void requireOneOf(const char* flag, const std::string& value, std::initializer_list<const char*> allowed) {
  std::string names;
  for (const char* a : allowed) {
    if (value == a) return;
    names += names.empty() ? a : std::string(", ") + a;
  }
  throw InputError(detail::cat(flag, " ", value, ": use one of ", names));
}

// Under mpirun, a plain loop on every rank would just repeat itself.
void requireOneProcess() {
  const char* ranks = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (ranks && std::atoi(ranks) > 1) {
    throw InputError("--baseline runs a plain LibTorch loop in one process; start it without mpirun -np > 1");
  }
}

}  // namespace

void TrainOptions::validate() const {
  if (baseline) requireOneProcess();
  // The session's options as the core checks them (the learning rate a model recommends is
  // positive); emulate_compute stands in for a profile.
  poseidon::validate(sessionOptions(1.0, 0));
  if (epochs <= 0 && iterations <= 0) throw InputError("give --epochs or --iterations a positive value");
  if (verify_every < 0) throw InputError("--verify must not be negative");
  checkCheckpointOptions(checkpoint_dir, checkpoint_every);
  // The CLI saves on a schedule only: a folder without one would stay empty.
  if (checkpoint_every == 0 && !checkpoint_dir.empty()) {
    throw InputError("--checkpoint-dir and --checkpoint-every go together: give both");
  }
  if (baseline && (!checkpoint_dir.empty() || !resume.empty())) {
    throw InputError("--baseline does not checkpoint; drop --checkpoint-dir and --resume");
  }
  if (!timeline.empty() && baseline) throw InputError("--timeline records Poseidon's work; drop --baseline");
  requireNewFile("--timeline", timeline);
  requireNewFile("--save-params", save_params);
  validateScheduleRule();
  requireOneOf("--lr-schedule", lr_schedule, {"linear", "constant"});
  requireOneOf("--optimizer", optimizer, {"sgd", "adam", "adamw"});
  requireOneOf("--device", device, {"cpu", "cuda", "auto"});
  const int passes = session.backward_passes_per_step;
  if (batch % passes != 0) {
    throw InputError(
        detail::cat("--batch ", batch, " does not split into ", passes, " equal micro-batches (--backward-passes)"));
  }
  if (!emulate_compute.empty()) {
    if (baseline) throw InputError("--emulate-compute emulates Poseidon's ranks; drop --baseline");
    if (iterations <= 0) throw InputError("--emulate-compute needs --iterations (there is no data to make epochs of)");
    // The emulation hands the session gradients of one pass and has no optimizer of its own.
    if (gradientMode() || session.backward_passes_per_step != 1) {
      throw InputError(
          "--emulate-compute emulates server-side SGD with one backward pass: drop --optimizer, "
          "--gradient-mode and --backward-passes");
    }
  } else {
    requireNewFile("--profile-out", profile_out);
  }
}

void TrainOptions::validateScheduleRule() const {
  const CostRule rule = parseCostRule(session.cost_model);
  if (rule != CostRule::kSchedule) {
    if (!profile.empty()) {
      throw InputError("--profile " + profile +
                       " is the schedule rule's input: add --cost-model schedule (or drop it)");
    }
    if (stack_rate != "0") throw InputError("--stack-rate goes with --cost-model schedule");
    return;
  }
  // Rank 0 alone reads it (it sends the plan to the others, whose hosts may have no copy):
  // a missing or malformed file fails there, before MPI.
  if (!profile.empty() && worldRank() == 0) readProfile(profile);
  parseRateOrOff(stack_rate, "stack_rate");
  // The rest of the rule's constraints are the core's (validate()).
}

Options TrainOptions::sessionOptions(double recommended_lr, std::int64_t total) const {
  Options o = session;
  if (!lr_given) o.lr = recommended_lr > 0 ? static_cast<float>(recommended_lr) : 0.01f;
  o.gradient_mode = gradientMode();
  o.batch = batch;
  o.lr_decay_iterations = lr_schedule == "linear" ? total : 0;
  o.timeline = !timeline.empty() || !profile_out.empty();
  // The schedule rule simulates the given profile, or the one whose compute is emulated.
  const std::string times = !profile.empty() ? profile : emulate_compute;
  const double stack = parseRateOrOff(stack_rate, "stack_rate");
  if (!times.empty()) o.schedule_plan = sim::schedulePlanFrom(times, session.kv_pair_bytes, stack, localRanks());
  return o;
}

}  // namespace poseidon::app
