// `poseidon simulate`: the simulator (src/simulate) for a built-in model of the papers or a
// profile of a real run, over one node count or a sweep, for one system or all four.
// Needs neither MPI nor LibTorch at run time.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "poseidon/options.h"

namespace poseidon::app {

inline constexpr const char* kDefaultModel = "vgg19-22k";

struct SimulateOptions {
  std::string model;  // empty: kDefaultModel, or with --profile the profile's own shapes
  std::string model_file;
  std::string profile;
  int nodes = 0;  // 0: --sweep or the default sweep
  std::string sweep;
  int devices_per_node = 1;
  long long batch = 0;  // 0: the model's (or the profile's)
  std::string bandwidth = "40gbit";
  std::string latency;
  std::string switch_capacity;
  std::string system = "all";
  std::string order = "default";
  std::string device_rate;
  std::string gemm_rate;
  std::string reduce_rate = "10GB";
  double host_cores = 0;  // 0: the host CPU is no bound
  int nodes_per_host = 1;
  std::string stack_rate = "0";
  std::string reconstruct = "device";
  std::string cost_model = "bytes";
  // The session's options the simulation takes as they are (wire, error_feedback,
  // kv_pair_bytes), from the option table's flags.
  Options session;
  int iterations = 3;
  bool layers = false;
  bool json = false;
};

CLI::App* addSimulateCommand(CLI::App& app, SimulateOptions& options);
int runSimulate(const SimulateOptions& options);

}  // namespace poseidon::app
