// `poseidon train`'s checkpoints: --checkpoint-dir/--checkpoint-every save the whole job's
// state every N iterations; --resume continues from the newest complete one, exactly: the
// same parameters, buffers, optimizer state (on the servers, or the workers' own in
// gradient mode), data position (the iteration) and random state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "poseidon/torch.h"
#include "torch/optimizer_state.h"
#include "torch/random_state.h"

namespace poseidon::app {

class RunCheckpoints {
 public:
  // Before the session exists: the checkpoint --resume names, checked for rank count.
  static std::optional<CheckpointInfo> findResume(const std::string& resume_dir, int ranks);

  // `optimizer`: the workers' own optimizer in gradient mode, else null. `config` is what
  // a resumed run must match.
  RunCheckpoints(TorchModel& model, torch::optim::Optimizer* optimizer, std::string save_dir, std::int64_t every,
                 std::string config);

  // Collective, between iterations once every sync is done (after model.synchronize()).
  void save(std::int64_t done_iterations);
  // Collective, right after the model is built with start_iteration = info.iteration.
  void restore(const CheckpointInfo& info);

 private:
  std::vector<StateRecord> records();
  int gpuIndex() const;  // the model's GPU
  void readRandomState(const CheckpointInfo& info);

  TorchModel& model_;
  std::unique_ptr<OptimizerState> optimizer_;
  const std::string dir_;
  const std::int64_t every_;
  const std::string config_;
  RandomState random_;  // the generators' state while saving or restoring
};

}  // namespace poseidon::app
