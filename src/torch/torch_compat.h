// Where LibTorch's API differs between the versions Poseidon builds with (1.13 and 2.x),
// the difference is bridged here and nowhere else; the rest of the adapter calls these.
// Each bridge is chosen from the types LibTorch itself declares, not from version macros.
#pragma once

#include <torch/torch.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace poseidon::compat {

// The key type of torch::optim::Optimizer::state(): a string made from the TensorImpl's
// address in 1.13 (c10::guts::to_string, gone in 2.x), the TensorImpl pointer in 2.x.
using OptimizerStateKey = typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

// The key under which LibTorch keeps parameter p's optimizer state. A template, so that
// only the branch of the LibTorch at hand is compiled.
template <class Key = OptimizerStateKey>
Key optimizerStateKey(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;  // what c10::guts::to_string(void*) wrote: operator<< of a pointer
    key << static_cast<const void*>(p.unsafeGetTensorImpl());
    return key.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

}  // namespace poseidon::compat
