// `poseidon train`'s checkpoints: --checkpoint-dir/--checkpoint-every save the whole job's
// state every N iterations; --resume continues from the newest complete one, exactly: the
// same parameters, optimizer state, data position (the iteration) and random state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "poseidon/session.h"

namespace poseidon::app {

class RunCheckpoints {
 public:
  // Before the session exists: the checkpoint --resume names, checked for rank count.
  static std::optional<CheckpointInfo> findResume(const std::string& resume_dir, int ranks);

  // `config` is what a resumed run must match.
  RunCheckpoints(Session& session, std::string save_dir, std::int64_t every, std::string config);

  bool due(std::int64_t done_iterations) const { return every_ > 0 && done_iterations % every_ == 0; }
  // Collective, between iterations once every sync is done.
  void save(std::int64_t done_iterations);
  // Collective, right after the session is built with start_iteration = info.iteration.
  void restore(const CheckpointInfo& info);

 private:
  std::vector<StateRecord> records();

  Session& session_;
  const std::string dir_;
  const std::int64_t every_;
  const std::string config_;
  std::vector<std::uint8_t> random_;  // the generator's bytes while saving or restoring
};

}  // namespace poseidon::app
