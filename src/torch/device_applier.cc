#include "torch/device_applier.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

torch::Tensor hostMatrix(const float* data, std::int64_t rows, std::int64_t cols) {
  return torch::from_blob(const_cast<float*>(data), {rows, cols}, torch::kFloat);
}

StateRecord view(const std::string& name, const torch::Tensor& host) {
  return StateRecord{name, host.data_ptr(), static_cast<std::size_t>(host.numel()) * sizeof(float)};
}

const char* const kTensorNames[] = {"weight", "bias"};

}  // namespace

DeviceFactorApplier::DeviceFactorApplier(std::vector<torch::Tensor> params)
    : device_(params.at(0).device()), params_(std::move(params)), momentum_(params_.size()) {
  POSEIDON_ENFORCE(params_.size() <= 2, "an SFB layer has a weight and at most a bias");
  if (streams()) {
    const c10::DeviceGuard on_device(device_);
    stream_ = c10::impl::VirtualGuardImpl(device_.type()).getStreamFromGlobalPool(device_);
  }
}

std::optional<c10::Event> DeviceFactorApplier::recordOn(const c10::Stream& stream) const {
  c10::Event event(device_.type());
  event.record(stream);
  return event;
}

void DeviceFactorApplier::released() {
  if (!streams()) return;  // the CPU ran autograd's work already
  // The model's device current: CUDA would otherwise make the event on device 0.
  const c10::DeviceGuard on_device(device_);
  auto event = recordOn(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
  std::lock_guard<std::mutex> lock(mu_);
  released_ = std::move(event);
}

void DeviceFactorApplier::setGradientTarget(std::vector<torch::Tensor> grads) {
  POSEIDON_ENFORCE_EQ(grads.size(), params_.size(), "gradient tensors of an SFB layer");
  std::lock_guard<std::mutex> lock(mu_);
  target_ = std::move(grads);
}

void DeviceFactorApplier::waitUpdated() {
  if (!streams()) return;
  const c10::DeviceGuard on_device(device_);
  std::lock_guard<std::mutex> lock(mu_);
  if (updated_) updated_->block(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
}

void DeviceFactorApplier::apply(const StackedFactors& f, float scale, const SgdOptions& options, bool first_step) {
  torch::NoGradGuard no_grad;
  std::optional<c10::DeviceGuard> on_device;
  std::optional<c10::StreamGuard> on_stream;
  if (streams()) {
    on_device.emplace(device_);
    on_stream.emplace(*stream_);
  }
  // The factors first (a blocking copy: their host memory is the caller's), while the
  // backward pass may still be reading the weight.
  const auto U = hostMatrix(f.U, f.rows, f.M).to(device_);
  const auto V = hostMatrix(f.V, f.rows, f.N).to(device_);
  std::vector<torch::Tensor> target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (released_) released_->block(*stream_);
    target = target_;
  }
  // One GEMM for the weight's mean gradient (zeros when no worker used the layer: rows 0).
  std::vector<torch::Tensor> grads{torch::mm(U.t(), V).mul_(scale)};
  if (params_.size() > 1) grads.push_back(U.sum(0).mul_(scale));
  if (options.gradient_only) {
    POSEIDON_ENFORCE(target.size() == grads.size(), "gradient mode without a gradient target for an SFB layer");
    for (std::size_t t = 0; t < grads.size(); ++t) target[t].copy_(grads[t]);
  } else {
    step(grads, options, first_step);
  }
  if (!streams()) return;
  auto done = recordOn(*stream_);
  std::lock_guard<std::mutex> lock(mu_);
  updated_ = std::move(done);
}

void DeviceFactorApplier::step(std::vector<torch::Tensor>& grads, const SgdOptions& o, bool first_step) {
  // PyTorch's SGD, as the host's sgdStep: d = g + wd p; buf = d first, else m buf + d; p -= lr buf.
  for (std::size_t t = 0; t < grads.size(); ++t) {
    auto& g = grads[t];
    if (o.weight_decay != 0.0f) g.add_(params_[t], o.weight_decay);
    if (o.momentum == 0.0f) {
      params_[t].add_(g, -o.lr);
      continue;
    }
    // Resumed without momentum records: the host's zeros give the same first buffer.
    if (first_step || !momentum_[t].defined()) {
      momentum_[t] = g;
    } else {
      momentum_[t].mul_(o.momentum).add_(g);
    }
    params_[t].add_(momentum_[t], -o.lr);
  }
}

std::vector<StateRecord> DeviceFactorApplier::replicated() {
  waitUpdated();
  // Blocking copies on the current stream, which waits for the update.
  host_state_.clear();
  std::vector<StateRecord> out;
  for (std::size_t t = 0; t < params_.size(); ++t) {
    host_state_.push_back(params_[t].detach().to(torch::kCPU).contiguous());
    out.push_back(view(kTensorNames[t], host_state_.back()));
  }
  for (std::size_t t = 0; t < momentum_.size(); ++t) {
    if (!momentum_[t].defined()) continue;
    host_state_.push_back(momentum_[t].to(torch::kCPU).contiguous());
    out.push_back(view(std::string(kTensorNames[t]) + "_momentum", host_state_.back()));
  }
  return out;
}

void DeviceFactorApplier::addMomentumRecords(const std::string& prefix, std::vector<StateRecord>& records) {
  waitUpdated();
  host_momentum_.clear();
  for (std::size_t t = 0; t < params_.size(); ++t) {
    if (!momentum_[t].defined()) {
      momentum_[t] = torch::zeros_like(params_[t]);
      // Made on this stream, used on the update stream from now on: the allocator must not
      // hand the memory out again before the update stream is done with it.
      if (streams()) momentum_[t].record_stream(*stream_);
    }
    // On the CPU the record is the momentum itself; on a GPU a copy that a restore fills.
    host_momentum_.push_back(momentum_[t].to(torch::kCPU));
    records.push_back(view(prefix + kTensorNames[t] + "_momentum", host_momentum_.back()));
  }
}

void DeviceFactorApplier::momentumRestored() {
  torch::NoGradGuard no_grad;
  for (std::size_t t = 0; t < host_momentum_.size(); ++t) {
    if (!host_momentum_[t].is_same(momentum_[t])) momentum_[t].copy_(host_momentum_[t]);
  }
}

}  // namespace poseidon
