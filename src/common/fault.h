// A test hook for the failure tests: POSEIDON_FAULT="RANK:PHASE:ACTION[:N]" makes rank
// RANK, the Nth time (default 1) it reaches PHASE, do ACTION:
//   stop  - SIGSTOP itself: it hangs, alive, so no launcher can tell (a stalled machine);
//   exit  - end at once with status 17, as a crash would;
//   throw - throw a CommError, as a bug or a failed call would, and unwind.
// Phases: startup (before the start-up agreement), broadcast (before the initial
// parameters), iteration (end of an iteration), checkpoint (between a checkpoint's rank
// file and its manifest), finish (Session::finish, before the closing barrier).
// Unset, it costs one check of a cached flag.
#pragma once

namespace poseidon {

void faultPoint(int rank, const char* phase);

}  // namespace poseidon
