// An SFB layer's update where its weight lives (ATC'17's GPU design): for a model on a GPU
// the received factors go to the device (rows x (M + N) floats, small), the mean gradient
// is one GEMM there, and the SGD step (momentum on the device) follows on an update
// stream. The dense M x N matrix never exists on the host and the weight never crosses
// the bus, where the session's host applier would step the host mirror and send the whole
// weight back each iteration (VGG19's fc6: 400 MB).
// Ordering without device-wide synchronisation: the update stream waits for an event that
// autograd's stream records when the backward pass has queued its last use of the weight
// (released), and the layer's next forward, or the optimizer in gradient mode, waits on
// the update's event only (waitUpdated).
// Device-generic c10 calls only; on the CPU (tests: POSEIDON_MIRROR_ON_CPU) the same
// arithmetic runs synchronously with no events.
#pragma once

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/torch.h>

#include <mutex>
#include <optional>
#include <vector>

#include "poseidon/factor_applier.h"

namespace poseidon {

class DeviceFactorApplier final : public FactorApplier {
 public:
  // `params`: the layer's weight (M x N), then its bias if it has one.
  explicit DeviceFactorApplier(std::vector<torch::Tensor> params);

  // Autograd's stream has queued its last use of the weight in this backward pass: the
  // update may run after that (the autograd or training thread, once per iteration).
  void released();
  // Gradient mode: this iteration's gradient tensors, where the mean gradient goes.
  void setGradientTarget(std::vector<torch::Tensor> grads);
  // The current stream waits for the last update (the layer's next forward, the optimizer).
  void waitUpdated();
  // A restore wrote into the momentum records' memory: the device takes it.
  void momentumRestored();

  void apply(const StackedFactors& factors, float scale, const SgdOptions& options, bool first_step) override;
  std::vector<StateRecord> replicated() override;
  void addMomentumRecords(const std::string& prefix, std::vector<StateRecord>& records) override;

 private:
  bool streams() const { return !device_.is_cpu(); }
  void step(std::vector<torch::Tensor>& grads, const SgdOptions& options, bool first_step);
  std::optional<c10::Event> recordOn(const c10::Stream& stream) const;

  const torch::Device device_;
  const std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> momentum_;       // by tensor; undefined until made
  std::vector<torch::Tensor> host_state_;     // replicated()'s copies
  std::vector<torch::Tensor> host_momentum_;  // the records' copies, which a restore fills
  std::optional<c10::Stream> stream_;         // the update stream (a GPU)

  std::mutex mu_;  // the autograd, training and session threads meet here
  std::vector<torch::Tensor> target_;
  std::optional<c10::Event> released_, updated_;
};

}  // namespace poseidon
