#include "lab_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coordinator/units.h"
#include "lab.h"
#include "poseidon/errors.h"

namespace poseidon::app {

namespace {

// The job's process, for the signal handler to pass Ctrl-C or a kill on to; a handler can
// reach nothing but globals.
volatile sig_atomic_t g_child = 0;

void forward(int sig) {
  if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
}

double parseDelayMs(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  double ms = -1;
  if (unit == "ms")
    ms = v;
  else if (unit == "us")
    ms = v / 1000;
  else if (unit == "s")
    ms = v * 1000;
  if (end == text.c_str() || ms < 0 || ms > 10000)
    throw InputError("--latency " + text + ": give a delay such as 1ms or 200us");
  return ms;
}

std::string self() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw Error("cannot find the poseidon executable (/proc/self/exe)");
  return std::string(path, static_cast<std::size_t>(n));
}

}  // namespace

CLI::App* addLabCommand(CLI::App& app, LabOptions& o) {
  auto* cmd =
      app.add_subcommand("lab", "Run an mpirun job with each rank behind its own capped network link (needs root)");
  cmd->add_option("--ranks", o.ranks, "Ranks, each in its own network namespace")
      ->capture_default_str()
      ->each([&o](const std::string&) { o.ranks_given = true; });
  cmd->add_option("--nodes", o.nodes,
                  "Nodes instead: each a namespace behind one link, with --ranks-per-node ranks inside (they find "
                  "their node in POSEIDON_NODE; train with --devices-per-node host to aggregate inside nodes)");
  cmd->add_option("--ranks-per-node", o.ranks_per_node, "With --nodes: ranks sharing each node's link")
      ->capture_default_str();
  cmd->add_option("--bandwidth", o.bandwidth, "Each rank's link rate, both directions, e.g. 1gbit, 10gbit, 100mbit")
      ->capture_default_str();
  cmd->add_option("--latency", o.latency, "Delay added to each rank's link, e.g. 1ms (default: none)");
  cmd->add_option("command", o.command, "What each rank runs, after --, e.g. -- poseidon train --model fcnet")
      ->required();
  cmd->footer(
      "Example: sudo poseidon lab --ranks 4 --bandwidth 1gbit -- poseidon train --model fcnet --iterations 50\n"
      "Inside, LAB_MASTER_ADDR is rank 0's address and GLOO_SOCKET_IFNAME its interface (for PyTorch DDP).\n"
      "The namespaces (psd<pid>-*) are removed when the job ends, fails or is interrupted.");
  return cmd;
}

namespace {

// mpirun runs in the hub; each rank enters its node's namespace through `ip netns exec`
// (a node: the ranks rank / D; flat, D = 1). Ranks of one node talk over its loopback.
std::vector<std::string> mpirunInHub(const Lab& lab, int ranks, int per_node) {
  // clang-format off
  return {"ip", "netns", "exec", lab.hub(), "mpirun", "-np", std::to_string(ranks), "--oversubscribe",
          "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", lab.subnet(),
          "--mca", "oob_tcp_if_include", lab.subnet(), "/bin/sh", "-c",
          detail::cat("POSEIDON_NODE=$((OMPI_COMM_WORLD_RANK / ", per_node,
                      ")); export POSEIDON_NODE; exec ip netns exec \"$0$POSEIDON_NODE\" \"$@\""),
          lab.rankPrefix()};
  // clang-format on
}

// What every rank's process finds in its environment.
void setJobEnvironment(const Lab& lab, const LabOptions& o) {
  // Ranks in other namespaces must reach the PMIx server in the hub over the subnet.
  setenv("PMIX_MCA_ptl_tcp_remote_connections", "1", 1);
  setenv("PMIX_MCA_ptl_tcp_if_include", lab.subnet().c_str(), 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMP_NUM_THREADS", getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "1", 1);
  setenv("OPENBLAS_NUM_THREADS", getenv("OPENBLAS_NUM_THREADS") ? getenv("OPENBLAS_NUM_THREADS") : "1", 1);
  setenv("LAB_MASTER_ADDR", lab.address(0).c_str(), 1);
  setenv("GLOO_SOCKET_IFNAME", Lab::kInterface, 1);
  setenv("POSEIDON_LAB", detail::cat(o.bandwidth, o.latency.empty() ? "" : " " + o.latency).c_str(), 1);
}

// Runs argv to its end, passing SIGINT, SIGTERM and SIGHUP on to it (the lab's teardown
// must run after it); returns its wait status.
int runForwardingSignals(std::vector<std::string> argv) {
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{}, old_hup{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);

  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(detail::cat("cannot fork: ", std::strerror(errno)));
  if (pid == 0) {
    execvp(args[0], args.data());
    std::fprintf(stderr, "poseidon lab: cannot run ip: %s\n", std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) break;
  }
  g_child = 0;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  return status;
}

}  // namespace

int runLab(const LabOptions& o) {
  const double rate = parseBandwidth(o.bandwidth, "bandwidth");
  const double delay_ms = parseDelayMs(o.latency);
  if (o.command.empty()) throw InputError("give the command each rank runs after --");
  std::vector<std::string> command = o.command;
  if (command[0] == "poseidon") command[0] = self();

  if (o.nodes < 0 || o.ranks_per_node < 1 || (o.nodes == 0 && o.ranks_per_node != 1)) {
    throw InputError("--ranks-per-node goes with --nodes N (N >= 1) and must be at least 1");
  }
  const int per_node = o.nodes > 0 ? o.ranks_per_node : 1;
  const int links = o.nodes > 0 ? o.nodes : o.ranks;
  const int ranks = links * per_node;
  if (o.nodes > 0 && o.ranks_given && o.ranks != ranks) {
    throw InputError(detail::cat("--ranks ", o.ranks, " but --nodes ", o.nodes, " x --ranks-per-node ", per_node,
                                 " is ", ranks, "; give one or the other"));
  }
  if (ranks > 250) throw InputError("use at most 250 ranks in the lab");
  Lab lab(links, rate, delay_ms);
  const std::string who =
      per_node > 1 ? detail::cat(links, " nodes of ", per_node, " ranks") : detail::cat(links, " ranks");
  std::printf("poseidon lab: %s, each behind its own %s link%s (namespaces %s*, subnet %s)\n", who.c_str(),
              o.bandwidth.c_str(), delay_ms > 0 ? detail::cat(" with ", o.latency, " delay").c_str() : "",
              lab.rankPrefix().c_str(), lab.subnet().c_str());
  std::fflush(stdout);

  std::vector<std::string> argv = mpirunInHub(lab, ranks, per_node);
  argv.insert(argv.end(), command.begin(), command.end());

  setJobEnvironment(lab, o);
  const int status = runForwardingSignals(std::move(argv));
  // What crossed each link: the measured side of every bytes-per-iteration figure.
  std::string sent;
  for (int r = 0; r < links; ++r) sent += detail::cat(" ", lab.bytesSent(r));
  std::fprintf(stderr, "poseidon lab: bytes sent at each %s's NIC:%s\n", per_node > 1 ? "node" : "rank", sent.c_str());
  lab.tearDown();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0) std::fprintf(stderr, "poseidon lab: the job exited with status %d; the lab is removed\n", code);
  return code;
}

}  // namespace poseidon::app
