#include "comm/equal_everywhere.h"

#include "poseidon/errors.h"

namespace poseidon {

void checkEqualEverywhere(Collectives& control, const std::string& digest, const std::string& what) {
  const auto all = control.allgather(digest, what + " equality check");
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      throw Error(detail::cat("rank ", r, "'s ", what, " differ from rank 0's, where every rank should hold the same"));
    }
  }
}

}  // namespace poseidon
