// The random generators' state a checkpoint keeps, in one format for `poseidon train` and
// the Python package: the records "random/cpu" and "random/cuda/<index>" of each rank's
// state file. Taken where a save falls due (the state the next draws start from), restored
// before the loop resumes, so dropout draws what the uninterrupted run would have drawn.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "poseidon/state_record.h"

namespace poseidon {

class RandomState {
 public:
  RandomState() = default;
  // The CPU generator's state and the state of each GPU in `gpus` (device indices): the
  // GPUs the job draws on (Python: every GPU once CUDA is in use; the CLI: the model's).
  static RandomState take(const std::vector<int>& gpus);
  // The state saved in `rank`'s file of `info` (not collective); empty if that file holds
  // none (a checkpoint an older Python package wrote, its random state in its own bytes).
  static RandomState read(const CheckpointInfo& info, int rank);

  bool empty() const { return cpu_.empty(); }
  // Sets the generators: the CPU's, and each saved GPU's that this process has.
  void apply() const;
  // The CPU's, and the one saved GPU state onto `gpu` (the CLI: the model's device, which a
  // resumed rank may see under another index than the saving one).
  void applyOnto(int gpu) const;
  // Views of this object's bytes, to save from or restore into (sizes as taken or read).
  void addRecords(std::vector<StateRecord>& records);

 private:
  std::vector<std::uint8_t> cpu_;
  std::vector<std::pair<int, std::vector<std::uint8_t>>> gpus_;
};

}  // namespace poseidon
