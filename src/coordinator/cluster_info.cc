#include "coordinator/cluster_info.h"

#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

ClusterInfo::ClusterInfo(int ranks, int server_only, int shards)
    : ranks_(ranks), server_only_(server_only), shards_(shards == 0 ? ranks : shards) {
  if (ranks_ < 1) throw InputError("a job needs at least one rank");
  if (server_only_ < 0 || server_only_ >= ranks_) {
    throw OptionError(detail::cat("{server_ranks=", server_only_, "} but the job has ", ranks_,
                                  " MPI ranks: at least one rank must be a worker"));
  }
  if (shards_ < 1) throw OptionError(detail::cat("{shards=", shards_, "}: need at least one shard"));
  if (shards_ > ranks_) {
    throw OptionError(
        detail::cat("{shards=", shards_, "} but the job has ", ranks_, " MPI ranks: each shard needs its own rank"));
  }
  if (shards_ < server_only_) {
    throw OptionError(detail::cat("{shards=", shards_, "} is fewer than {server_ranks=", server_only_,
                                  "}: every server-only rank holds a shard"));
  }
}

}  // namespace poseidon
