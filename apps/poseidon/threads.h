// What the launcher says of this process (its rank, the ranks on its host), and the compute
// threads of a rank: ATen's intra-op pool and OpenBLAS's own pool, so ranks sharing a host
// do not fight over its cores.
#pragma once

namespace poseidon::app {

// Ranks on this host, as the launcher says (1 without mpirun).
int localRanks();
// This process's rank in the job, as the launcher says (0 without mpirun).
int worldRank();
// `requested` threads, or cores / local ranks (at least 1) when 0; returns what it set.
int setComputeThreads(int requested);

}  // namespace poseidon::app
