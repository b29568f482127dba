// A torch::optim optimizer's state as checkpoint records (views of live memory), so that
// a resumed run in gradient mode continues with the same moments and step counts.
// LibTorch creates a parameter's state lazily in its first step(); the records need it to
// exist from the start, so it is created here exactly as step() would create it (zeros,
// step 0), which leaves every later step's arithmetic unchanged.
//
// Supported: Adam and AdamW (exp_avg, exp_avg_sq, max_exp_avg_sq with amsgrad, step), SGD
// (momentum_buffer, when momentum is on and dampening 0). Anything else: InputError.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/state_record.h"

namespace poseidon {

// State on a GPU as host copies: (the state tensor, its host copy), filled by the caller.
using StateMirrors = std::vector<std::pair<torch::Tensor, torch::Tensor>>;

// Creates any missing state, then returns views of the state tensors of every parameter
// of every group, named "<prefix>/g<group>/p<index>/<field>". Step counts are not
// tensors: OptimizerState below covers them. State on a device is refused unless
// `mirrors` is given: then the views are of host copies of it, listed there.
std::vector<StateRecord> optimizerStateRecords(torch::optim::Optimizer& optimizer, const std::string& prefix,
                                               StateMirrors* mirrors = nullptr);

// The whole state of one optimizer for a checkpoint: the tensors by view, and the integer
// step counts through memory this object owns.
//   OptimizerState state(optimizer, "optimizer");
//   save:    records = state.records();   (copies the steps out; then write the records)
//   restore: records = state.records(); read into them; state.afterRestore();
class OptimizerState {
 public:
  OptimizerState(torch::optim::Optimizer& optimizer, std::string prefix);

  // Views valid until the next call; the step counts are copied out at each call.
  std::vector<StateRecord> records();
  // Writes what a restore read into the records back into the optimizer: the step counts,
  // and the state on a GPU from its host copies.
  void afterRestore();

 private:
  torch::optim::Optimizer& optimizer_;
  const std::string prefix_;
  std::vector<std::int64_t> steps_;
  StateMirrors mirrors_;  // of the last records()
};

}  // namespace poseidon
