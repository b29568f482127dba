// `poseidon lab`: runs an mpirun job with every rank (or every node of D ranks) in its own
// network namespace behind its own bandwidth cap (and delay), then removes the namespaces, on failure and Ctrl-C
// too. What runs inside is any command line: `poseidon train ...`, or a PyTorch DDP script
// (it finds LAB_MASTER_ADDR and GLOO_SOCKET_IFNAME set, and its rank in OMPI_COMM_WORLD_*).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace poseidon::app {

struct LabOptions {
  int ranks = 4;
  // Nodes: each a namespace behind one capped link, holding `ranks_per_node` ranks (which
  // find their node in $POSEIDON_NODE). 0: every rank its own node (flat).
  int nodes = 0;
  int ranks_per_node = 1;
  bool ranks_given = false;
  std::string bandwidth = "1gbit";
  std::string latency;  // e.g. 1ms; empty: none
  std::vector<std::string> command;
};

CLI::App* addLabCommand(CLI::App& app, LabOptions& options);
int runLab(const LabOptions& options);

}  // namespace poseidon::app
