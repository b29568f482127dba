// The MPI side of a collective channel (comm/collective_channel.h), apart so that what
// includes the transport interface needs no mpi.h (the fuzz targets build without MPI).
#pragma once

#include <mpi.h>

namespace poseidon {

struct MpiChannel {
  // The channel's ranks, in its order; the Communicator duplicates it. `owned`: freed by
  // whoever builds on it, after that (a group's); else the transport's own.
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;
};

}  // namespace poseidon
