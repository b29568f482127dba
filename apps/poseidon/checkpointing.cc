#include "checkpointing.h"

#include <cstdio>

#include "poseidon/errors.h"
#include "poseidon/torch.h"

namespace poseidon::app {

std::optional<CheckpointInfo> RunCheckpoints::findResume(const std::string& resume_dir, int ranks) {
  if (resume_dir.empty()) return std::nullopt;
  CheckpointInfo info = Checkpointer::latest(resume_dir);
  Checkpointer::checkRanks(info, ranks);
  return info;
}

RunCheckpoints::RunCheckpoints(Session& session, std::string save_dir, std::int64_t every, std::string config)
    : session_(session), dir_(std::move(save_dir)), every_(every), config_(std::move(config)) {}

std::vector<StateRecord> RunCheckpoints::records() {
  auto records = session_.stateRecords();
  records.push_back(StateRecord{"random/cpu", random_.data(), random_.size()});
  return records;
}

void RunCheckpoints::save(std::int64_t done) {
  random_ = randomState();
  Checkpointer(dir_, session_.control(), session_.rank(), session_.size())
      .save(static_cast<std::uint64_t>(done), config_, records());
  if (session_.rank() == 0) {
    std::printf("poseidon: checkpoint of iteration %lld saved in %s\n", static_cast<long long>(done), dir_.c_str());
    std::fflush(stdout);
  }
}

void RunCheckpoints::restore(const CheckpointInfo& info) {
  Checkpointer::checkCompatible(info, config_, session_.size());
  random_ = randomState();  // the right size; overwritten by the restore
  Checkpointer(dir_, session_.control(), session_.rank(), session_.size()).load(info, records());
  setRandomState(random_);
  if (session_.rank() == 0) {
    std::printf("poseidon: resumed from %s at iteration %llu\n", info.folder.c_str(),
                static_cast<unsigned long long>(info.iteration));
    std::fflush(stdout);
  }
}

}  // namespace poseidon::app
