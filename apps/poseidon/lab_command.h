// `poseidon lab`: runs an mpirun job with every rank in its own network namespace behind
// its own bandwidth cap (and delay), then removes the namespaces, on failure and Ctrl-C
// too. What runs inside is any command line: `poseidon train ...`, or a PyTorch DDP script
// (it finds LAB_MASTER_ADDR and GLOO_SOCKET_IFNAME set, and its rank in OMPI_COMM_WORLD_*).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace poseidon::app {

struct LabOptions {
  int ranks = 4;
  std::string bandwidth = "1gbit";
  std::string latency;  // e.g. 1ms; empty: none
  std::vector<std::string> command;
};

CLI::App* addLabCommand(CLI::App& app, LabOptions& options);
int runLab(const LabOptions& options);

}  // namespace poseidon::app
