// Where an SFB layer's received factors become its update (ATC'17 §3.2, the "reconstruct"
// half of sufficient factor broadcasting). The session's own applier works on the host
// buffers the session was given: it builds the mean gradient a block of rows at a time
// and steps the weight in place. An engine whose weights live elsewhere (a GPU) gives the
// session its own applier (Session::setFactorApplier), which reconstructs there with one
// GEMM, so the dense M x N matrix never crosses the bus.
// Every replica must compute bit for bit the same: an applier is deterministic, and all
// ranks use the same kind (the adapter checks that they agree).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/sgd_options.h"
#include "poseidon/state_record.h"

namespace poseidon {

// All workers' factors of one iteration, stacked in rank order: U (rows x M), the
// gradients at the layer's output; V (rows x N), its inputs. Host memory, valid during
// apply() only.
struct StackedFactors {
  const float* U = nullptr;
  const float* V = nullptr;
  std::int64_t rows = 0, M = 0, N = 0;
};

class FactorApplier {
 public:
  virtual ~FactorApplier() = default;
  // The mean gradient is scale * U^T V for the weight (M x N) and scale * the column sums
  // of U for the bias; then one step with `options` (in gradient mode the mean gradient is
  // written where the gradients go). `first_step` starts the momentum. Runs on one of the
  // session's threads, after the engine released the layer for this iteration.
  virtual void apply(const StackedFactors& factors, float scale, const SgdOptions& options, bool first_step) = 0;
  // The replicated state (weight, bias, then momentum where it exists) as current host
  // memory, for the digest that checks replicas agree. Between iterations only.
  virtual std::vector<StateRecord> replicated() = 0;
  // The optimizer state (momentum) as host memory named "<prefix>weight_momentum" and
  // "<prefix>bias_momentum", in that order, made (zeros) if no step has run yet, so that a restore can
  // write into it. Between iterations only.
  virtual void addMomentumRecords(const std::string& prefix, std::vector<StateRecord>& records) = 0;
};

}  // namespace poseidon
