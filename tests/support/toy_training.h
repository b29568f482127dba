// An engine-free "model" for the session's tests, shared by the threads-as-ranks unit test
// and the real mpirun smoke run: each worker's gradient is p - target(worker), a quadratic
// loss whose mean gradient a single-process reference computes exactly.
#pragma once

#include <cstddef>
#include <vector>

#include "common/half.h"
#include "poseidon/model_info.h"
#include "poseidon/options.h"

namespace poseidon {

class Session;

namespace toy {

// A conv layer and two FC layers, so every scheme has a layer to work on.
ModelInfo model();
float initial(std::size_t flat);
float target(int worker, std::size_t flat);

// One worker's parameters and gradients, laid out layer by layer, tensor by tensor.
struct Replica {
  std::vector<std::vector<std::vector<float>>> params, grads;
  std::vector<std::vector<std::size_t>> base;  // flat index of each tensor's first value
  std::vector<std::vector<float*>> pointers();
};

// Rank 0 holds initial(); the others garbage, so the session's broadcast must fix them.
Replica makeReplica(const ModelInfo& m, int rank);

// x rounded as the wire rounds it; with error feedback x + residual is, and the residual
// becomes what that rounding lost.
void roundWithFeedback(WireFormat wire, bool feedback, std::vector<float>& x, std::vector<float>& residual);

// params[l][t] after `iterations` of mean-gradient SGD with o's lr, momentum and decay;
// o.wire "bf16" or "fp16": each worker's gradient and each step's update rounded as the
// wire rounds them, one tensor at a time (fp16's scale is per KV pair: exact where each
// tensor is one pair); BSP server mode. o.error_feedback: each rounding's residual is
// added to the next push (by worker) or update, as the wire's error feedback does.
std::vector<std::vector<std::vector<float>>> reference(const ModelInfo& m, int workers, const Options& o,
                                                       int iterations);

// The training loop of a worker: backward top layer first, each layer reported at once.
void train(Session& session, Replica& r, int worker, int iterations);

}  // namespace toy
}  // namespace poseidon
