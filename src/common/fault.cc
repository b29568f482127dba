#include "common/fault.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

struct FaultSpec {
  bool set = false;
  int rank = -1;
  std::string phase, action;
  int nth = 1;
};

FaultSpec parse(const char* text) {
  FaultSpec f;
  if (!text || !*text) return f;
  char phase[32] = {0}, action[16] = {0};
  int nth = 1;
  int used = 0;
  const int n = std::sscanf(text, "%d:%31[a-z]:%15[a-z]%n:%d%n", &f.rank, phase, action, &used, &nth, &used);
  const std::string p = phase, a = action;
  const bool known_phase = p == "startup" || p == "broadcast" || p == "iteration" || p == "checkpoint" || p == "finish";
  const bool known_action = a == "stop" || a == "exit" || a == "throw";
  if (n < 3 || text[used] != '\0' || nth < 1 || !known_phase || !known_action) {
    // A test hook that silently never fires would make its test pass for the wrong reason.
    std::fprintf(stderr,
                 "poseidon: POSEIDON_FAULT='%s' is not RANK:PHASE:ACTION[:N] (phases startup, broadcast, "
                 "iteration, checkpoint, finish; actions stop, exit, throw; N >= 1)\n",
                 text);
    std::_Exit(2);
  }
  f.set = true;
  f.phase = phase;
  f.action = action;
  f.nth = n == 4 ? nth : 1;
  return f;
}

}  // namespace

void faultPoint(int rank, const char* phase) {
  // Read once: the environment is the test's, fixed before the program starts.
  static const FaultSpec spec = parse(std::getenv("POSEIDON_FAULT"));
  static std::atomic<int> reached{0};
  if (!spec.set || spec.rank != rank || spec.phase != phase) return;
  if (++reached != spec.nth) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "poseidon: rank %d: POSEIDON_FAULT: %s at phase %s (time %.3f)\n", rank, spec.action.c_str(),
               phase, now);
  std::fflush(stderr);
  if (spec.action == "stop") {
    raise(SIGSTOP);
  } else if (spec.action == "exit") {
    std::_Exit(17);
  } else if (spec.action == "throw") {
    throw CommError(detail::cat("rank ", rank, ": injected failure at phase ", phase));
  }
}

}  // namespace poseidon
