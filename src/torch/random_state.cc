// LibTorch's default generator of a device as bytes, for checkpoints and the probe
// (dropout draws from the generator of the device it runs on).
#include "torch/random_state.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "poseidon/errors.h"
#include "poseidon/torch.h"

namespace poseidon {

std::vector<std::uint8_t> randomState(torch::Device device) {
  // A handle to the process-wide generator (Generator is a shared pointer).
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor state = gen.get_state().contiguous();
  const auto* p = state.data_ptr<std::uint8_t>();
  return std::vector<std::uint8_t>(p, p + state.numel());
}

void setRandomState(const std::vector<std::uint8_t>& bytes, torch::Device device) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor state = torch::empty({static_cast<std::int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr<std::uint8_t>(), bytes.data(), bytes.size());
  gen.set_state(state);
}

namespace {

constexpr const char* kCpuRecord = "random/cpu";
constexpr const char* kGpuPrefix = "random/cuda/";

torch::Device gpu(int index) { return torch::Device(torch::kCUDA, static_cast<torch::DeviceIndex>(index)); }

// "random/cuda/<index>" -> index, or -1.
int gpuIndexOf(const std::string& name) {
  const std::string prefix = kGpuPrefix;
  if (name.rfind(prefix, 0) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(digits);
}

// By device index: the order of the records written and the records read back.
void sortByIndex(std::vector<std::pair<int, std::vector<std::uint8_t>>>& gpus) {
  std::sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace

RandomState RandomState::take(const std::vector<int>& gpus) {
  RandomState s;
  s.cpu_ = randomState();
  for (int i : gpus) s.gpus_.emplace_back(i, randomState(gpu(i)));
  sortByIndex(s.gpus_);
  return s;
}

RandomState RandomState::read(const CheckpointInfo& info, int rank) {
  RandomState s;
  for (auto& [name, bytes] : Checkpointer::readRecords(info, rank, "random/")) {
    std::vector<std::uint8_t> state(bytes.begin(), bytes.end());
    if (name == kCpuRecord) {
      s.cpu_ = std::move(state);
    } else if (gpuIndexOf(name) >= 0) {
      s.gpus_.emplace_back(gpuIndexOf(name), std::move(state));
    } else {
      throw InputError(detail::cat("the checkpoint in ", info.folder, " holds a random state '", name,
                                   "' this build does not know"));
    }
  }
  sortByIndex(s.gpus_);
  if (s.cpu_.empty() && !s.gpus_.empty()) {
    throw InputError(detail::cat("the checkpoint in ", info.folder, " holds no CPU random state"));
  }
  return s;
}

void RandomState::apply() const {
  if (!cpu_.empty()) setRandomState(cpu_);
  // The GPUs this process sees (a saving run may have seen more).
  const int here = gpus_.empty() ? 0 : static_cast<int>(torch::cuda::device_count());
  for (const auto& [i, state] : gpus_) {
    if (i < here) setRandomState(state, gpu(i));
  }
}

void RandomState::applyOnto(int index) const {
  if (!cpu_.empty()) setRandomState(cpu_);
  if (gpus_.size() > 1) throw InputError("the checkpoint holds the random state of several GPUs; this run has one");
  if (!gpus_.empty()) setRandomState(gpus_.front().second, gpu(index));
}

void RandomState::addRecords(std::vector<StateRecord>& records) {
  if (cpu_.empty()) return;  // none read: the restore that follows fails on the record count
  records.emplace_back(kCpuRecord, cpu_.data(), cpu_.size());
  for (auto& [i, state] : gpus_) records.emplace_back(kGpuPrefix + std::to_string(i), state.data(), state.size());
}

}  // namespace poseidon
