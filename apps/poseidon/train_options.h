// Flags of `poseidon train`: one struct, checked in one place (validate()).
#pragma once

#include <cstdint>
#include <string>

#include "poseidon/config.h"  // generated: POSEIDON_DEFAULT_DATA_DIR
#include "poseidon/options.h"

namespace poseidon::app {

struct TrainOptions {
  std::string model = "fcnet";
  std::string model_file;
  std::string data = POSEIDON_DEFAULT_DATA_DIR;
  bool synthetic = false;
  std::int64_t batch = 32;  // per worker per iteration, over all its backward passes
  std::int64_t epochs = 1;
  std::int64_t iterations = 0;  // 0: run `epochs` full epochs
  std::uint64_t seed = 42;
  // sgd: server-side SGD (or a local torch::optim::SGD with --gradient-mode); adam, adamw:
  // a local torch::optim optimizer on the mean gradient (gradient mode).
  std::string optimizer = "sgd";
  // cpu, cuda (this rank's GPU: its local rank among the visible ones), or auto (cuda when
  // PyTorch sees a GPU).
  std::string device = "cpu";
  int verify_every = 0;                // compare SFB replicas across workers every N iterations
  bool no_eval = false;
  bool json = false;
  bool baseline = false;  // a plain LibTorch loop on one process, for comparison
  bool lr_given = false;  // else the model's recommended rate
  std::string lr_schedule = "linear";
  int threads = 0;    // 0: cores / ranks on this host
  int log_every = 0;  // 0: about every 5 seconds
  std::string save_params;
  std::string checkpoint_dir;         // save checkpoints here
  std::int64_t checkpoint_every = 0;  // every N iterations (0: never)
  std::string resume;                 // continue from the newest checkpoint in this folder
  std::string timeline;               // write a Chrome trace here
  std::string emulate_compute;        // replace compute by the waits of this profile
  std::string profile_out;            // write this run's per-layer compute times here
  std::string profile;                // measured layer times for --cost-model schedule
  std::string stack_rate = "0";       // the schedule rule's host CPU bound: bytes per CPU second
  // The session's options the CLI shows (the option table's rows with kCliFront), set by
  // their flags through the table's parser.
  Options session;

  // Every check of the flags and their combinations that needs no data and no MPI, so a
  // mistake ends the run before anything starts; throws InputError (one line).
  void validate() const;
  void validateScheduleRule() const;  // --cost-model schedule, --profile, --stack-rate
  // Whether the optimizer steps on the workers (on the mean gradient) instead of the
  // parameter servers.
  bool gradientMode() const { return optimizer != "sgd" || session.gradient_mode; }
  // The session's options for a net whose recommended learning rate is `recommended_lr`
  // (used unless --lr is given) and a run of `total` iterations.
  Options sessionOptions(double recommended_lr, std::int64_t total) const;
};

}  // namespace poseidon::app
