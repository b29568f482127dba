#include "torch/device_staging.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

torch::Device deviceOf(const std::vector<std::vector<torch::Tensor>>& params) {
  for (const auto& layer : params) {
    for (const auto& t : layer) return t.device();
  }
  return torch::kCPU;
}

// A host tensor for `like`'s values: pinned where the device copies from it asynchronously.
torch::Tensor hostMirror(const torch::Tensor& like, bool pinned) {
  return torch::empty(like.sizes(), torch::TensorOptions().dtype(torch::kFloat).pinned_memory(pinned));
}

std::vector<float*> pointers(std::vector<torch::Tensor>& tensors) {
  std::vector<float*> out;
  for (auto& t : tensors) out.push_back(t.data_ptr<float>());
  return out;
}

// Tensors are handles to reference-counted storage: holding them holds their memory.
template <typename Tensors>
std::shared_ptr<const void> owning(const Tensors& tensors) {
  return std::make_shared<const Tensors>(tensors);
}

}  // namespace

DeviceStaging::DeviceStaging(const std::vector<std::vector<torch::Tensor>>& params, bool mirror_on_cpu)
    : device_(deviceOf(params)), params_(params) {
  for (const auto& layer : params) {
    for (const auto& t : layer) {
      if (t.device() != device_) {
        throw InputError(detail::cat("the model's parameters are on ", device_.str(), " and ", t.device().str(),
                                     ": Poseidon trains a model on one device; move it with .to(device) first"));
      }
    }
  }
  mirrored_ = !device_.is_cpu() || mirror_on_cpu;
  if (!mirrored_) {
    host_params_ = params_;
    return;
  }
  const bool pinned = !device_.is_cpu();
  for (const auto& layer : params_) {
    std::vector<torch::Tensor> values, grads;
    for (const auto& t : layer) {
      values.push_back(hostMirror(t, pinned));
      grads.push_back(hostMirror(t, pinned).zero_());
    }
    host_params_.push_back(std::move(values));
    host_grads_.push_back(std::move(grads));
  }
  if (streams()) {
    const c10::impl::VirtualGuardImpl impl(device_.type());
    copy_stream_ = impl.getStreamFromGlobalPool(device_);
  }
  // Mirrored on the CPU too, so that the tests there see the same order of calls.
  thread_ = std::thread([this] { run(); });
}

DeviceStaging::~DeviceStaging() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<std::vector<float*>> DeviceStaging::hostParams() {
  std::vector<std::vector<float*>> out;
  for (auto& layer : host_params_) out.push_back(pointers(layer));
  return out;
}

std::shared_ptr<const void> DeviceStaging::hostParamsOwner() const { return owning(host_params_); }

std::vector<float*> DeviceStaging::hostGradients(int layer) { return pointers(host_grads_.at(layer)); }

void DeviceStaging::paramsToHost() {
  for (std::size_t l = 0; l < params_.size(); ++l) layerToHost(static_cast<int>(l));
}

void DeviceStaging::layerToHost(int layer) {
  if (!mirrored_) return;
  torch::NoGradGuard no_grad;
  for (std::size_t t = 0; t < params_.at(layer).size(); ++t) host_params_[layer][t].copy_(params_[layer][t].detach());
}

void DeviceStaging::paramsToDevice() {
  if (!mirrored_) return;
  torch::NoGradGuard no_grad;
  for (std::size_t l = 0; l < params_.size(); ++l) {
    for (std::size_t t = 0; t < params_[l].size(); ++t) params_[l][t].detach().copy_(host_params_[l][t]);
  }
}

std::optional<c10::Event> DeviceStaging::onCopyStream(const std::function<void()>& copies) {
  if (!streams()) {
    copies();
    return std::nullopt;
  }
  // The model's device current while events are made and recorded (and destroyed): CUDA's
  // guard otherwise switches back to device 0, which would open a context there.
  const c10::DeviceGuard on_device(device_);
  const c10::impl::VirtualGuardImpl impl(device_.type());
  c10::Event produced(device_.type());
  produced.record(impl.getStream(device_));
  produced.block(*copy_stream_);
  {
    c10::StreamGuard on_copy(*copy_stream_);
    copies();
  }
  c10::Event done(device_.type());
  done.record(*copy_stream_);
  return done;
}

void DeviceStaging::gradientsOut(int layer, const std::vector<torch::Tensor>& grads, bool zero_device,
                                 std::function<void(std::vector<float*>, std::shared_ptr<const void>)> ready) {
  if (!mirrored_) {
    std::vector<float*> ptrs;
    for (const auto& g : grads) ptrs.push_back(g.data_ptr<float>());
    ready(std::move(ptrs), owning(grads));
    return;
  }
  auto& host = host_grads_.at(layer);
  auto done = onCopyStream([&] {
    for (std::size_t t = 0; t < grads.size(); ++t) {
      host[t].copy_(grads[t], /*non_blocking=*/true);
      if (zero_device) grads[t].zero_();
      // The gradient's memory is in use on the copy stream until the copy is over, even
      // if the user drops .grad before then.
      if (streams()) grads[t].record_stream(*copy_stream_);
    }
  });
  enqueue(std::move(done), [ready = std::move(ready), ptrs = pointers(host), owner = owning(host)]() mutable {
    ready(std::move(ptrs), std::move(owner));
  });
}

void DeviceStaging::factorsOut(torch::Tensor U, torch::Tensor V,
                               std::function<void(const torch::Tensor&, const torch::Tensor&)> ready) {
  if (!mirrored_) {
    ready(U, V);
    return;
  }
  if (U.device().is_cpu()) {
    // In order with the gradients queued before: the core takes its calls one at a time.
    enqueue(std::nullopt, [ready = std::move(ready), U, V] { ready(U, V); });
    return;
  }
  auto hu = hostMirror(U, true);
  auto hv = hostMirror(V, true);
  auto done = onCopyStream([&] {
    hu.copy_(U, /*non_blocking=*/true);
    hv.copy_(V, /*non_blocking=*/true);
    U.record_stream(*copy_stream_);
    V.record_stream(*copy_stream_);
  });
  enqueue(std::move(done), [ready = std::move(ready), hu, hv] { ready(hu, hv); });
}

void DeviceStaging::then(std::function<void()> fn) { enqueue(std::nullopt, std::move(fn)); }

void DeviceStaging::toDevice(const std::vector<torch::Tensor>& from, const std::vector<torch::Tensor>& to) {
  torch::NoGradGuard no_grad;
  if (!streams()) {
    for (std::size_t t = 0; t < to.size(); ++t) to[t].detach().copy_(from[t]);
    return;
  }
  // After what the compute stream has queued (the last backward may still read the
  // tensors); the compute stream then waits for these copies alone.
  const c10::DeviceGuard on_device(device_);
  auto done = onCopyStream([&] {
    for (std::size_t t = 0; t < to.size(); ++t) to[t].detach().copy_(from[t], /*non_blocking=*/true);
  });
  const c10::impl::VirtualGuardImpl impl(device_.type());
  done->block(impl.getStream(device_));
}

void DeviceStaging::valuesIn(int layer) {
  if (mirrored_) toDevice(host_params_.at(layer), params_.at(layer));
}

void DeviceStaging::gradientsIn(int layer, const std::vector<torch::Tensor>& grads) {
  if (mirrored_) toDevice(host_grads_.at(layer), grads);
}

void DeviceStaging::enqueue(std::optional<c10::Event> done, std::function<void()> fn) {
  if (!mirrored_) {
    fn();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Pending{std::move(done), std::move(fn)});
  }
  cv_.notify_all();
}

void DeviceStaging::run() {
  // This thread's current device is the model's, so that the events it waits for and
  // destroys never make CUDA open a context on another device.
  if (streams()) c10::impl::VirtualGuardImpl(device_.type()).setDevice(device_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      // This copy only, not the device; polled (an event's synchronize spins a core).
      while (p.done && !p.done->query()) std::this_thread::sleep_for(std::chrono::microseconds(50));
      // After a failure the rest is dropped: drain() reports the first cause.
      if (!error_) p.fn();
    } catch (...) {
      error_ = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void DeviceStaging::drain() {
  if (!mirrored_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace poseidon
