// The optimizer step that the servers, and the workers for replicated layers, apply: SGD
// with momentum and weight decay with PyTorch's semantics (see update/sgd.h), or in
// gradient mode no step at all (the mean gradient is written, the user's optimizer steps).
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

namespace poseidon {

// The optimizer's lr, momentum and weight decay as the training loop sets them (an LR
// scheduler, a warm-up by hand), per iteration: written by the compute thread before that
// iteration's gradients leave, read by whoever applies the iteration's update (a shard, a
// replica) after every worker's gradient arrived. Every rank runs the same loop, so every
// rank's own table holds the same values.
class StepValues {
 public:
  struct Values {
    float lr, momentum, weight_decay;
  };
  void set(std::uint64_t t, Values v) {
    std::lock_guard<std::mutex> lock(mu_);
    by_iteration_[t] = v;
    // Updates lag the loop by a few iterations at most (SSP's bound): keep a window.
    while (by_iteration_.size() > kKept) by_iteration_.erase(by_iteration_.begin());
  }
  // The values set for iteration t or, when none were, for the latest one before it.
  bool get(std::uint64_t t, Values& v) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_iteration_.upper_bound(t);
    if (it == by_iteration_.begin()) return false;
    v = std::prev(it)->second;
    return true;
  }

 private:
  static constexpr std::size_t kKept = 4096;
  mutable std::mutex mu_;
  std::map<std::uint64_t, Values> by_iteration_;
};

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  // Linear decay of lr to zero over this many iterations; 0 keeps lr constant.
  std::int64_t decay_iterations = 0;
  // Gradient mode: a "step" writes the mean gradient where the parameters would be, and
  // the workers' own optimizer steps. Every other field is then unused.
  bool gradient_only = false;
  // Devices whose gradients each contribution sums (a node's, at the devices level): the
  // mean divides by these too. Accumulated backward passes are summed, never divided
  // (Horovod's backward_passes_per_step: the loop divides its loss).
  int devices = 1;
  // The loop's own values per iteration, where it sets them (server mode from Python);
  // they take the place of lr, momentum, weight_decay and the decay.
  std::shared_ptr<const StepValues> step_values;

  // The options of the step that iteration t applies (every rank computes the same).
  SgdOptions at(std::uint64_t t) const {
    SgdOptions o = *this;
    StepValues::Values v{};
    if (step_values && step_values->get(t, v)) {
      o.lr = v.lr;
      o.momentum = v.momentum;
      o.weight_decay = v.weight_decay;
    } else if (decay_iterations > 0) {
      const double left = 1.0 - static_cast<double>(t) / static_cast<double>(decay_iterations);
      o.lr = static_cast<float>(lr * (left > 0 ? left : 0.0));
    }
    return o;
  }
};

}  // namespace poseidon
