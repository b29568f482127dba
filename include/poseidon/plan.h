// How the session synchronises each layer, as the coordinator planned it (ATC'17 §3.3,
// HybComm): the scheme per layer with the cost model's figures and reasons, and the
// machine's rates the time rule used. Read by programs that report the plan.
#pragma once

#include <string>

namespace poseidon {

// How one layer's parameters are synchronised: through the parameter server (PS), by
// sufficient factor broadcasting (SFB), the 2015 paper's comparison strategy after Project
// Adam (factor push: factors to the server, full matrices back; not the Adam optimizer), or summed by MPI_Allreduce
// among the workers with the update replicated on each or, in server mode, stepped by each
// slice's owner (Mamidala 2018); or, for a layer whose gradient touches only some rows (an
// embedding's lookup), by sparse rows: each worker sends the rows its gradient touched and
// their indices to every other, and every worker sums them in rank order and steps its
// replica, as SFB does.
enum class Scheme { kPS, kSFB, kFactorPush, kAllreduce, kRows };
const char* schemeName(Scheme scheme);
// The layer's worker sends sufficient factors (factorsReady), not its gradient.
inline bool usesFactors(Scheme scheme) { return scheme == Scheme::kSFB || scheme == Scheme::kFactorPush; }

// What the time rule needs to know about the machine.
struct PlatformRates {
  double bandwidth_bytes_per_s = 0;  // per node, each direction
  double gemm_flops_per_s = 0;
  bool known() const { return bandwidth_bytes_per_s > 0 && gemm_flops_per_s > 0; }
};

struct LayerPlan {
  Scheme scheme = Scheme::kPS;
  // Per node, send + receive, as in ATC'17 Table 1 (0 for layers without the option);
  // ps_floats in fp32 floats' worth of bytes (PlanRequest::ps_wire_share: x0.5 with 16-bit
  // pushes and updates).
  double ps_floats = 0, sfb_floats = 0, factor_push_floats = 0, allreduce_floats = 0, rows_floats = 0;
  // Predicted seconds per iteration when rates are known (else 0).
  double ps_seconds = 0, sfb_seconds = 0, allreduce_seconds = 0, rows_seconds = 0;
  Scheme bytes_choice = Scheme::kPS;  // what each rule alone would pick
  Scheme time_choice = Scheme::kPS;
  std::string reason;
};

}  // namespace poseidon
