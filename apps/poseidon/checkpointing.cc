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
  random_.addRecords(records);
  return records;
}

int RunCheckpoints::gpuIndex() const {
  const auto device = model_.device();
  return device.has_index() ? device.index() : 0;
}

// Collective: every rank reads its saved random state (the records' sizes, which the load
// then fills), or every rank stops with the failing rank's error.
void RunCheckpoints::readRandomState(const CheckpointInfo& info) {
  Session& session = model_.session();
  std::string mine = "ok";
  try {
    random_ = RandomState::read(info, session.layout().rank);
  } catch (const std::exception& e) {
    mine = detail::cat("rank ", session.layout().rank, ": ", e.what());
  }
  for (const auto& a : session.control().allgather(mine, "checkpoint random state")) {
    if (a != "ok") throw InputError("cannot resume: " + a);
  }
}

void RunCheckpoints::save(std::int64_t done) {
  Session& session = model_.session();
  // The CPU's generator, and the model's GPU's (where its dropout draws).
  random_ = RandomState::take(model_.device().is_cpu() ? std::vector<int>{} : std::vector<int>{gpuIndex()});
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
  readRandomState(info);
  Checkpointer(dir_, session.control(), session.layout().rank, session.layout().size).load(info, records());
  model_.stateRestored();
  if (model_.device().is_cpu()) {
    random_.apply();
  } else {
    random_.applyOnto(gpuIndex());
  }
  if (optimizer_) optimizer_->afterRestore();
  if (session.layout().rank == 0) {
    std::printf("poseidon: resumed from %s at iteration %llu\n", info.folder.c_str(),
                static_cast<unsigned long long>(info.iteration));
    std::fflush(stdout);
  }
}

}  // namespace poseidon::app
