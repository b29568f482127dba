// `poseidon plan`: the cost model and BestScheme for a model and a cluster, without MPI.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "poseidon/options.h"

namespace poseidon::app {

struct PlanOptions {
  std::string model;  // empty: fcnet, or the --profile's own layers
  std::string model_file;
  std::string profile;              // measured layer times: the model's layers, and the schedule rule's input
  std::vector<std::string> layers;  // "MxN", repeatable
  int workers = 8;
  int servers = 0;  // 0: as many as workers (co-located)
  int nodes = 0;    // the devices level: P1 = nodes, K = devices_per_node * batch (0: flat)
  int devices_per_node = 1;
  long long batch = 32;
  std::string bandwidth;
  double gflops = 0;
  double host_cores = 0;  // the schedule rule's host CPU bound (0: not modelled)
  int nodes_per_host = 1;
  std::string stack_rate = "0";
  // The session's options a plan depends on (cost_model, wire, error_feedback), from the
  // option table's flags.
  Options session;
  bool json = false;
};

CLI::App* addPlanCommand(CLI::App& app, PlanOptions& options);
int runPlan(const PlanOptions& options);

}  // namespace poseidon::app
