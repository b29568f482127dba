#include "lab.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "poseidon/errors.h"

namespace poseidon::app {

int runCommand(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(detail::cat("cannot fork: ", std::strerror(errno)));
  if (pid == 0) {
    execvp(args[0], args.data());
    std::fprintf(stderr, "poseidon lab: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(detail::cat("waitpid failed: ", std::strerror(errno)));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {

void must(const std::vector<std::string>& argv) {
  if (runCommand(argv) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw Error("lab set-up failed: " + cmd);
  }
}

// tc rate in bits per second, as tc reads it.
std::string tcRate(double bytes_per_s) {
  return detail::cat(static_cast<long long>(std::llround(bytes_per_s * 8)), "bit");
}

std::vector<std::string> shape(const std::string& ns, const std::string& dev, double rate, double delay_ms) {
  if (delay_ms > 0) {
    return {"ip",
            "netns",
            "exec",
            ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "netem",
            "delay",
            detail::cat(delay_ms, "ms"),
            "rate",
            tcRate(rate),
            "limit",
            "100000"};
  }
  // A token bucket: bursts of 20 ms worth of bytes at most, so short tests see the rate too.
  const long long burst = std::max(64LL * 1024, static_cast<long long>(rate / 50));
  return {"ip",      "netns", "exec",       ns,      "tc",
          "qdisc",   "add",   "dev",        dev,     "root",
          "tbf",     "rate",  tcRate(rate), "burst", std::to_string(burst),
          "latency", "200ms"};
}

}  // namespace

Lab::Lab(int ranks, double rate, double delay_ms) {
  if (geteuid() != 0) {
    throw InputError("poseidon lab needs root to make network namespaces and shape them with tc; run it with sudo");
  }
  if (ranks < 1 || ranks > 250) throw InputError("--ranks: use 1 to 250 ranks in the lab");
  const long pid = static_cast<long>(getpid());
  prefix_ = detail::cat("psd", pid);
  hub_ = prefix_ + "-hub";
  // Every lab's links live in its own namespaces, so addresses cannot clash between labs;
  // the subnet only varies to keep captures of two labs apart.
  base_ = detail::cat("10.", 100 + pid % 100, ".", (pid / 100) % 250, ".");
  subnet_ = base_ + "0/24";
  try {
    must({"ip", "netns", "add", hub_});
    made_.push_back(hub_);
    must({"ip", "-n", hub_, "link", "set", "lo", "up"});
    must({"ip", "-n", hub_, "link", "add", "br0", "type", "bridge"});
    must({"ip", "-n", hub_, "addr", "add", base_ + "254/24", "dev", "br0"});
    must({"ip", "-n", hub_, "link", "set", "br0", "up"});
    for (int r = 0; r < ranks; ++r) {
      const std::string ns = rankNamespace(r);
      const std::string hub_end = detail::cat("vb", r), rank_end = detail::cat("vr", r);
      must({"ip", "netns", "add", ns});
      made_.push_back(ns);
      must({"ip", "-n", ns, "link", "set", "lo", "up"});
      must({"ip", "-n", hub_, "link", "add", hub_end, "type", "veth", "peer", "name", rank_end});
      must({"ip", "-n", hub_, "link", "set", rank_end, "netns", ns});
      must({"ip", "-n", ns, "link", "set", rank_end, "name", kInterface});
      must({"ip", "-n", ns, "addr", "add", address(r) + "/24", "dev", kInterface});
      must({"ip", "-n", ns, "link", "set", kInterface, "up"});
      must({"ip", "-n", hub_, "link", "set", hub_end, "master", "br0"});
      must({"ip", "-n", hub_, "link", "set", hub_end, "up"});
      // Both ends: what the rank sends and what it receives each pass one cap.
      must(shape(ns, kInterface, rate, delay_ms / 2));
      must(shape(hub_, hub_end, rate, delay_ms / 2));
    }
  } catch (...) {
    tearDown();
    throw;
  }
}

Lab::~Lab() { tearDown(); }

long long Lab::bytesSent(int rank) const {
  // The hub's end of the rank's veth receives exactly what the rank's NIC sends.
  const std::string cmd =
      detail::cat("ip netns exec ", hub_, " cat /sys/class/net/vb", rank, "/statistics/rx_bytes 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  long long bytes = -1;
  if (std::fscanf(p, "%lld", &bytes) != 1) bytes = -1;
  pclose(p);
  return bytes;
}

std::string Lab::rankNamespace(int rank) const { return detail::cat(prefix_, "-r", rank); }
std::string Lab::address(int rank) const { return detail::cat(base_, rank + 1); }

void Lab::tearDown() {
  // Deleting a namespace deletes its links; the veth pairs go with their rank ends.
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    if (runCommand({"ip", "netns", "del", *it}) != 0) {
      std::fprintf(stderr, "poseidon lab: could not remove network namespace %s; remove it with: ip netns del %s\n",
                   it->c_str(), it->c_str());
    }
  }
  made_.clear();
}

}  // namespace poseidon::app
