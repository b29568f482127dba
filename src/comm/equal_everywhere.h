// A check that every rank holds the same values, by digest: cheaper than a broadcast where
// they should already be equal (a running job's next session), and loud where they are not.
#pragma once

#include <string>

#include "poseidon/collectives.h"

namespace poseidon {

// Collective: throws Error naming the first rank whose `digest` of `what` differs from
// rank 0's.
void checkEqualEverywhere(Collectives& control, const std::string& digest, const std::string& what);

}  // namespace poseidon
