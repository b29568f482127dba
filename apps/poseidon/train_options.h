// Flags of `poseidon train`.
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
  std::int64_t batch = 32;
  std::int64_t epochs = 1;
  std::int64_t iterations = 0;  // 0: run `epochs` full epochs
  std::uint64_t seed = 42;
  std::string bandwidth;  // for --cost-model time; empty: measure
  double gflops = 0;      // for --cost-model time; 0: measure
  int verify_every = 0;   // compare SFB replicas across workers every N iterations
  bool no_wfbp = false;
  bool no_eval = false;
  bool json = false;
  bool baseline = false;
  bool lr_given = false;  // else the model's recommended rate
  std::string lr_schedule = "linear";  // a plain LibTorch loop on one process, for comparison
  int threads = 0;        // 0: cores / ranks on this host
  int log_every = 0;      // 0: about every 5 seconds
  double timeout_s = 120;
  double straggler_timeout_s = 0;  // 0: BSP waits for every worker
  std::string save_params;
  std::string checkpoint_dir;       // save checkpoints here
  std::int64_t checkpoint_every = 0;  // every N iterations (0: never)
  std::string resume;               // continue from the newest checkpoint in this folder
  std::string timeline;             // write a Chrome trace here
  std::string emulate_compute;      // replace compute by the waits of this profile
  std::string profile_out;          // write this run's per-layer compute times here
  Options session;
};

}  // namespace poseidon::app
