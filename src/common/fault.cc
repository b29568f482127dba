#include "common/fault.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  const int n = std::sscanf(text, "%d:%31[a-z]:%15[a-z]:%d", &f.rank, phase, action, &nth);
  if (n < 3) {
    std::fprintf(stderr, "poseidon: POSEIDON_FAULT='%s' is not RANK:PHASE:ACTION[:N]; ignored\n", text);
    return f;
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
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "poseidon: rank %d: POSEIDON_FAULT: %s at phase %s (time %.3f)\n", rank,
               spec.action.c_str(), phase, now);
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
