// LibTorch's default generator of a device as bytes, for checkpoints and the probe
// (dropout draws from the generator of the device it runs on).
#include <ATen/Context.h>

#include <cstring>
#include <mutex>

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

}  // namespace poseidon
