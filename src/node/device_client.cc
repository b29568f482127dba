#include "node/device_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "poseidon/errors.h"
#include "comm/factors.h"

namespace poseidon {

DeviceClient::DeviceClient(const ModelInfo& model, const std::vector<bool>& factors, Transport& world, int leader,
                           std::vector<std::vector<float*>> params, const DeviceOptions& options, FailureState& failure,
                           const NodeMemory* memory)
    : model_(model),
      factors_(factors),
      world_(world),
      leader_(leader),
      params_(std::move(params)),
      factor_targets_(model.layers.size()),
      options_(options),
      failure_(failure),
      memory_(memory),
      slot_(world.rank() - leader - 1),
      iteration_(options.start_iteration),
      reported_(model.layers.size(), false),
      complete_(model.layers.size(), true),
      arrived_(model.layers.size()),
      in_memory_(model.layers.size(), 0),
      released_(model.layers.size(), options.start_iteration),
      // One thread per layer: a layer waiting for its values never holds up another's.
      pool_(static_cast<int>(std::max<std::size_t>(1, model.layers.size())), "poseidon-device", failure) {}

DeviceClient::~DeviceClient() { pool_.shutdown(); }

// `owner` is not needed: the gradient is copied (into the node's slot or a message) here.
void DeviceClient::gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> /*owner*/) {
  const LayerInfo& info = model_.layers.at(layer);
  POSEIDON_ENFORCE_EQ(grads.size(), info.tensors.size(), "gradients of layer ", layer);
  FloatSpans spans;
  for (std::size_t k = 0; k < grads.size(); ++k)
    spans.emplace_back(grads[k], static_cast<std::size_t>(info.tensors[k].numel()));
  if (float* slot = memory_ ? memory_->slot(layer, slot_) : nullptr) {
    // expect() insists that this device has taken in (layer, t-1), which the leader shared
    // only after adding this slot: the slot is free.
    expect(layer, std::move(grads));
    gatherInto(spans, slot);
    std::atomic_thread_fence(std::memory_order_release);
    Message word = Message::make(MsgType::kNodeGradShared, wholeLayerKey(layer),
                                 static_cast<std::uint32_t>(world_.rank()), iteration_, 0);
    word.setPriority(layer);
    world_.send(leader_, std::move(word));
    return;
  }
  // Copies: the leader adds them to its own when its sync of the layer starts, by which
  // time autograd may be accumulating this device's next backward pass.
  auto pieces = cutIntoPieces(MsgType::kNodeGrad, layer, world_.rank(), iteration_, spans, options_.piece_floats);
  expect(layer, std::move(grads));
  for (auto& m : pieces) world_.send(leader_, std::move(m));
}

void DeviceClient::factorsReady(int layer, const float* U, const float* V, std::int64_t K) {
  const LayerInfo& info = model_.layers.at(layer);
  const FloatSpans spans{{U, static_cast<std::size_t>(K * info.M)}, {V, static_cast<std::size_t>(K * info.N)}};
  auto pieces = cutIntoPieces(MsgType::kNodeFactors, layer, world_.rank(), iteration_, spans, options_.piece_floats);
  expect(layer, {});
  for (auto& m : pieces) world_.send(leader_, std::move(m));
}

void DeviceClient::setFactorGradients(int layer, std::vector<float*> grads) {
  std::lock_guard<std::mutex> lock(mu_);
  factor_targets_.at(layer) = std::move(grads);
}

void DeviceClient::layerReleased(int layer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_.at(layer) = std::max(released_[layer], iteration_ + 1);
  }
  cv_.notify_all();
}

void DeviceClient::expect(int layer, std::vector<float*> grads) {
  if (reported_[layer]) {
    throw Error(detail::cat("layer ", layer, " reported its gradient twice in iteration ", iteration_,
                            "; call step() after every backward pass"));
  }
  reported_[layer] = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The leader gathers one iteration of a layer at a time (node_stage.h).
    if (!complete_[layer]) {
      throw Error(detail::cat("layer '", model_.layers[layer].name, "' started a sync while that of iteration ",
                              iteration_ - 1, " runs: wait for the layer (waitLayer) before its next forward"));
    }
    complete_[layer] = false;
  }
  const std::uint64_t t = iteration_;
  pool_.schedule([this, layer, t, grads = std::move(grads)] {
    apply(layer, t, grads);
    {
      std::lock_guard<std::mutex> lock(mu_);
      complete_[layer] = true;
    }
    cv_.notify_all();
  });
}

void DeviceClient::apply(int layer, std::uint64_t t, const std::vector<float*>& grads) {
  const LayerInfo& info = model_.layers[layer];
  PieceAssembly values;
  std::uint64_t shared = 0;  // the iteration + 1 of values in memory_
  std::vector<float*> into;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // An SFB weight changes only once autograd is done with it (as SfbSyncer::Move).
    // Twice the leader's timeout: when another node is silent, the leader's own timeout
    // names it first, and this device's message would only blame the leader.
    waitFor(
        lock, cv_,
        [&] {
          return (in_memory_[layer] > 0 || arrived_[layer].complete()) && (!factors_[layer] || released_[layer] > t);
        },
        2 * options_.timeout, &failure_,
        detail::cat("rank ", world_.rank(), ": layer '", info.name, "' of iteration ", t,
                    " from its node's leader, rank ", leader_, " (which may itself be waiting on another node)"));
    // Moved out, not copied: the transport thread delivers under this lock.
    values = std::exchange(arrived_[layer], PieceAssembly());
    shared = std::exchange(in_memory_[layer], 0);
    into = options_.gradient_mode ? (factors_[layer] ? factor_targets_[layer] : grads) : params_[layer];
  }
  if (into.size() != info.tensors.size()) {
    throw Error(detail::cat("rank ", world_.rank(), " has no gradient buffers for layer '", info.name,
                            "' (setFactorGradients before its factors)"));
  }
  FloatTargets targets;
  std::size_t floats = 0;
  for (std::size_t k = 0; k < into.size(); ++k) {
    targets.emplace_back(into[k], static_cast<std::size_t>(info.tensors[k].numel()));
    floats += targets.back().second;
  }
  if (shared > 0) {
    if (shared - 1 != t) {
      throw CommError(detail::cat("rank ", leader_, " shared layer '", info.name, "' of iteration ", shared - 1,
                                  "; rank ", world_.rank(), " expected iteration ", t));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    scatterFrom(memory_->values(layer), targets, false);
  } else if (values.iteration() != t || values.floats() != floats) {
    throw CommError(detail::cat("rank ", leader_, " sent layer '", info.name, "' of iteration ", values.iteration(),
                                " with ", values.floats(), " values; rank ", world_.rank(), " expected iteration ", t,
                                " and ", floats));
  } else {
    values.scatterInto(targets, false);
  }
  // Server mode: the gradient is consumed (the leader's Move clears its own the same way).
  if (!options_.gradient_mode) {
    for (std::size_t k = 0; k < grads.size(); ++k) {
      std::memset(grads[k], 0, static_cast<std::size_t>(info.tensors[k].numel()) * sizeof(float));
    }
  }
}

void DeviceClient::deliver(Message m) {
  const PieceKey key = PieceKey::of(m.header().key);
  if (static_cast<int>(m.header().source) != leader_ || key.layer >= static_cast<int>(arrived_.size())) {
    throw CommError(detail::cat("rank ", m.header().source, " sent layer ", key.layer, " to device rank ",
                                world_.rank(), ", whose leader is rank ", leader_));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.type() != MsgType::kNodeParamsShared) {
      if (in_memory_[key.layer] > 0) {
        throw CommError(
            detail::cat("rank ", leader_, " sent a piece of layer ", key.layer, " already shared in memory"));
      }
      arrived_[key.layer].add(std::move(m));
    } else if (!memory_ || in_memory_[key.layer] > 0 || !arrived_[key.layer].empty()) {
      throw CommError(detail::cat("rank ", leader_, " shared layer ", key.layer, " in memory, which device rank ",
                                  world_.rank(), memory_ ? " does not expect there now" : " does not have"));
    } else {
      in_memory_[key.layer] = m.header().iteration + 1;
    }
  }
  cv_.notify_all();
}

void DeviceClient::endIteration() {
  for (std::size_t l = 0; l < reported_.size(); ++l) {
    if (!reported_[l]) {
      throw Error(detail::cat("layer '", model_.layers[l].name, "' produced no gradient in iteration ", iteration_,
                              "; every layer with parameters must take part in the loss"));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : released_) r = std::max(r, iteration_ + 1);  // the backward pass is over
  }
  cv_.notify_all();
  reported_.assign(reported_.size(), false);
  ++iteration_;
}

void DeviceClient::waitSynced(int layer) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, cv_, [&] { return static_cast<bool>(complete_[layer]); }, 2 * options_.timeout, &failure_,
      detail::cat("rank ", world_.rank(), ": layer '", model_.layers[layer].name, "' for iteration ", iteration_ - 1,
                  " from its node's leader, rank ", leader_, " (which may itself be waiting on another node)"));
}

void DeviceClient::waitLayer(int layer) { waitSynced(layer); }

void DeviceClient::waitAll() {
  for (std::size_t l = 0; l < complete_.size(); ++l) waitSynced(static_cast<int>(l));
}

}  // namespace poseidon
