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
  std::string scheme = "ps";
  bool no_wfbp = false;
  bool no_eval = false;
  bool json = false;
  bool baseline = false;  // a plain LibTorch loop on one process, for comparison
  int threads = 0;        // 0: cores / ranks on this host
  int log_every = 0;      // 0: about every 5 seconds
  double timeout_s = 120;
  std::string save_params;
  Options session;
};

}  // namespace poseidon::app
