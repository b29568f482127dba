// LibTorch's default CPU generator as bytes, for checkpoints (dropout draws from it).
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <mutex>

#include "poseidon/errors.h"
#include "poseidon/torch.h"

namespace poseidon {

std::vector<std::uint8_t> randomState() {
  // A handle to the process-wide generator (Generator is a shared pointer).
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor state = gen.get_state().contiguous();
  const auto* p = state.data_ptr<std::uint8_t>();
  return std::vector<std::uint8_t>(p, p + state.numel());
}

void setRandomState(const std::vector<std::uint8_t>& bytes) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor state = torch::empty({static_cast<std::int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr<std::uint8_t>(), bytes.data(), bytes.size());
  gen.set_state(state);
}

}  // namespace poseidon
