// Between autograd's tensors and the core's host buffers. The core (servers, syncers,
// SFB) reads and writes float buffers in host memory; a model on a GPU keeps its
// parameters and gradients in device memory. For such a model every trained tensor gets
// a pinned host mirror of its values and one of its gradient, and the copies follow the
// papers' GPU design with no device-wide synchronisation:
//  - a layer's gradient leaves the GPU as soon as autograd has produced it: a copy on a
//    copy stream that first waits for an event on the producing stream; backward goes on.
//    A staging thread waits for that copy alone, then hands the host gradient to the core;
//  - a layer's fresh values (or, in gradient mode, its mean gradient) go back on the copy
//    stream when the layer is next waited for, and the compute stream waits on that copy's
//    event only.
// Everything the hooks would hand to the core goes through the staging thread in order, so
// the core still sees one caller at a time, as with a CPU model (step() drains first).
// A CPU model has no mirrors and every call here is direct, as before. Tests may ask for
// mirrors on the CPU (`mirror_on_cpu`): the same bookkeeping and staging thread, with
// synchronous copies in place of the copy stream.
// Only device-generic c10 calls (streams, events, record_stream): this file builds with any
// LibTorch; CUDA is what a CUDA wheel registers behind them at run time.
#pragma once

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/torch.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace poseidon {

class DeviceStaging {
 public:
  // `params[l]`: layer l's trained tensors, all on one device (checked).
  DeviceStaging(const std::vector<std::vector<torch::Tensor>>& params, bool mirror_on_cpu);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // The model's tensors live elsewhere than the host buffers the core reads.
  bool mirrored() const { return mirrored_; }
  torch::Device device() const { return device_; }

  // Where the core reads and writes each tensor's values: the tensor itself, or its mirror;
  // and an owner that keeps that memory alive (for the core's sends from it).
  std::vector<std::vector<float*>> hostParams();
  std::shared_ptr<const void> hostParamsOwner() const;
  // Every layer's values, device to host or host to device, waiting for the copies (not in
  // the training loop: start-up, checkpoints, restores).
  void paramsToHost();
  void paramsToDevice();
  // One layer's values, device to host (its update ran on the device).
  void layerToHost(int layer);

  // Autograd has produced layer l's gradient (`grads`, in the layer's tensor order):
  // `ready` gets host pointers once the values are there (inline for a CPU model, else on
  // the staging thread), and an owner that keeps their memory alive. `zero_device`: the device gradient is cleared after the copy
  // (server mode: the gradient is consumed; the core clears the host one).
  void gradientsOut(int layer, const std::vector<torch::Tensor>& grads, bool zero_device,
                    std::function<void(std::vector<float*>, std::shared_ptr<const void>)> ready);
  // SFB factors U (K x M), V (K x N): `ready` gets them in host memory (small copies).
  void factorsOut(torch::Tensor U, torch::Tensor V,
                  std::function<void(const torch::Tensor&, const torch::Tensor&)> ready);
  // Runs `fn` after everything handed over before it (SFB release, gradient targets).
  void then(std::function<void()> fn);
  // Waits until every callback above has run; rethrows the first that failed.
  // Callbacks run on the staging thread whenever the model is mirrored.
  void drain();

  // Layer l's host values (server mode) or its host gradient mirrors (gradient mode,
  // into `grads`) are new: copy them to the device; the current stream waits for them.
  void valuesIn(int layer);
  void gradientsIn(int layer, const std::vector<torch::Tensor>& grads);
  // The host gradient mirror of layer l (gradient mode: where the core writes the mean).
  std::vector<float*> hostGradients(int layer);

 private:
  // Copies on a copy stream with events (a GPU); mirrored CPU copies are synchronous.
  bool streams() const { return mirrored_ && !device_.is_cpu(); }
  // Runs `copies` on the copy stream after what the current stream has queued so far;
  // returns the event that marks their end (none for the CPU).
  std::optional<c10::Event> onCopyStream(const std::function<void()>& copies);
  void toDevice(const std::vector<torch::Tensor>& from, const std::vector<torch::Tensor>& to);
  void enqueue(std::optional<c10::Event> done, std::function<void()> fn);
  void run();

  torch::Device device_{torch::kCPU};
  bool mirrored_ = false;
  std::vector<std::vector<torch::Tensor>> params_;
  std::vector<std::vector<torch::Tensor>> host_params_;  // mirrors (or the tensors themselves)
  std::vector<std::vector<torch::Tensor>> host_grads_;   // mirrors; empty when not mirrored
  std::optional<c10::Stream> copy_stream_;

  // The staging thread and its queue: copies' events and what to run after each.
  struct Pending {
    std::optional<c10::Event> done;
    std::function<void()> fn;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace poseidon
