#include "checkpointing.h"

#include <cstdio>

#include "poseidon/errors.h"

namespace poseidon::app {

std::optional<CheckpointInfo> RunCheckpoints::findResume(const std::string& resume_dir, int ranks) {
  if (resume_dir.empty()) return std::nullopt;
  CheckpointInfo info = Checkpointer::latest(resume_dir);
  Checkpointer::checkRanks(info, ranks);
  return info;
}

RunCheckpoints::RunCheckpoints(TorchModel& model, torch::optim::Optimizer* optimizer, std::string save_dir,
                               std::int64_t every, std::string config)
    : model_(model), dir_(std::move(save_dir)), every_(every), config_(std::move(config)) {
  // Created now: the optimizer's state must exist before a restore can fill it.
  if (optimizer) optimizer_ = std::make_unique<OptimizerState>(*optimizer, "optimizer");
}

std::vector<StateRecord> RunCheckpoints::records() {
  auto records = model_.stateRecords();
  if (optimizer_) {
    for (auto& r : optimizer_->records()) records.push_back(std::move(r));
  }
  records.push_back(StateRecord{"random/cpu", random_.data(), random_.size()});
  if (!gpu_random_.empty()) records.push_back(StateRecord{"random/gpu", gpu_random_.data(), gpu_random_.size()});
  return records;
}

void RunCheckpoints::takeRandomState() {
  random_ = randomState();
  if (!model_.device().is_cpu()) gpu_random_ = randomState(model_.device());
}

void RunCheckpoints::save(std::int64_t done) {
  Session& session = model_.session();
  takeRandomState();
  Checkpointer(dir_, session.control(), session.layout().rank, session.layout().size)
      .save(static_cast<std::uint64_t>(done), config_, records());
  if (session.layout().rank == 0) {
    std::printf("poseidon: checkpoint of iteration %lld saved in %s\n", static_cast<long long>(done), dir_.c_str());
    std::fflush(stdout);
  }
}

void RunCheckpoints::restore(const CheckpointInfo& info) {
  Session& session = model_.session();
  Checkpointer::checkCompatible(info, config_, session.layout().size);
  takeRandomState();  // the right sizes; overwritten by the restore
  Checkpointer(dir_, session.control(), session.layout().rank, session.layout().size).load(info, records());
  model_.stateRestored();
  setRandomState(random_);
  if (!gpu_random_.empty()) setRandomState(gpu_random_, model_.device());
  if (optimizer_) optimizer_->afterRestore();
  if (session.layout().rank == 0) {
    std::printf("poseidon: resumed from %s at iteration %llu\n", info.folder.c_str(),
                static_cast<unsigned long long>(info.iteration));
    std::fflush(stdout);
  }
}

}  // namespace poseidon::app
