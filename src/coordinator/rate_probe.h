// Measures what the time cost model needs, once at start-up: the link bandwidth (rank 0
// sends 8 MB to every other rank) and the GEMM rate (rank 0 times the SFB reconstruction
// GEMM of the model's largest FC layer). Rank 0's figures are then broadcast, so every
// rank plans with the same numbers and reaches the same plan.
#pragma once

#include <cstdint>

#include "coordinator/scheme_planner.h"

namespace poseidon {

class ControlChannel;

// Collective: every rank calls it. `known` fields that are already positive are kept.
PlatformRates measureRates(ControlChannel& control, int rank, int ranks, const ModelInfo& model, int workers,
                           std::int64_t batch, PlatformRates known);

// Flop rate of one row-major GEMM (m x k) * (k x n), timed after a warm-up.
double gemmRate(std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace poseidon
