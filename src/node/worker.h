// A rank's training side as the session drives it, whatever the level it trains at: the
// client library (a flat rank, or a node's leader, which also speaks for its devices) or a
// device beside its node's leader (DeviceClient). The session calls one of them through
// this interface and never asks which (the devices level is an implementation, not a branch).
// Here, below both implementations (src/client uses src/node, not the other way round).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "poseidon/factor_applier.h"

namespace poseidon {

class Worker {
 public:
  virtual ~Worker() = default;
  // Once per iteration and layer: the layer's gradient (or its sufficient factors U, V).
  // `owner` keeps the gradients' memory alive (null: the caller keeps it past the job).
  virtual void gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> owner) = 0;
  virtual void factorsReady(int layer, const float* U, const float* V, std::int64_t K) = 0;
  // Gradient mode: where an SFB layer's mean gradient goes.
  virtual void setFactorGradients(int layer, std::vector<float*> grads) = 0;
  // Autograd no longer needs the layer's weight in this backward pass.
  virtual void layerReleased(int layer) = 0;
  // The backward pass is over; advances the iteration.
  virtual void endIteration() = 0;
  // Blocks until the layer (or every layer) holds the current iteration's values.
  virtual void waitLayer(int layer) = 0;
  virtual void waitAll() = 0;
  virtual std::uint64_t iteration() const = 0;
  // The engine applies SFB layer l's factors itself (its weights live on a GPU). False
  // where the layer's step is not this rank's to take, or it must stay on the host buffers
  // (a node's leader shares them with its devices): the session's host applier stays.
  virtual bool setFactorApplier(int /*layer*/, std::unique_ptr<FactorApplier>& /*applier*/) { return false; }
};

}  // namespace poseidon
