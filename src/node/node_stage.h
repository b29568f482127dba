// A node leader's side of the devices level (the 2015 paper's three levels): before a
// layer's network exchange the leader adds its devices' gradients to its own (rank order),
// or stacks their sufficient factors under its own, so the node crosses the network once
// with its whole batch; after the exchange it hands the layer's fresh values (or, in
// gradient mode, the mean gradient) to each device without touching the network again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "comm/transport.h"
#include "common/wait.h"
#include "coordinator/node_map.h"
#include "node/node_memory.h"
#include "node/pieces.h"
#include "poseidon/model_info.h"

namespace poseidon {

class NodeStage {
 public:
  // `params[l]` are layer l's tensors in the leader's engine. `world` reaches the devices;
  // `memory` (may be null: messages only) is shared with them (node_memory.h).
  NodeStage(const ModelInfo& model, Transport& world, const NodeMap& nodes, std::vector<std::vector<float*>> params,
            bool gradient_mode, std::size_t piece_floats, std::chrono::milliseconds timeout,
            const FailureState& failure, const NodeMemory* memory);

  // A piece of a device's gradient or factors, or word that its gradient is in the
  // shared memory (transport thread).
  void deliver(Message message);
  // Waits for every device's gradient of `layer` for iteration t and adds them to `grads`
  // (the leader's own), in rank order. In gradient mode `grads` is also where the mean
  // gradient will be, which share() sends.
  void addDeviceGradients(int layer, std::uint64_t t, const std::vector<float*>& grads);
  // Waits for every device's factors and returns the node's: the leader's rows, then each
  // device's, U above V as one worker's message would have them.
  Message stackDeviceFactors(int layer, std::uint64_t t, Message own);
  // Gradient mode, SFB layer: where the mean gradient goes (the weight's and bias's .grad).
  void setGradientTarget(int layer, std::vector<float*> grads);
  // Sends the layer's state after iteration t to every device of the node.
  void share(int layer, std::uint64_t t);

 private:
  // What one device sent for a layer: pieces, or word that it is in its memory slot.
  struct Share {
    PieceAssembly pieces;
    bool in_memory = false;
    std::uint64_t memory_iteration = 0;
    bool complete() const { return in_memory || pieces.complete(); }
    std::uint64_t iteration() const { return in_memory ? memory_iteration : pieces.iteration(); }
    MsgType type() const { return in_memory ? MsgType::kNodeGrad : pieces.type(); }
  };
  // Waits until every device's values for (layer, t) are in; returns them in rank order.
  std::vector<Share> take(int layer, std::uint64_t t, MsgType type);

  const ModelInfo& model_;
  Transport& world_;
  const std::vector<int> devices_;  // world ranks, rank order
  const int first_device_;
  std::vector<std::vector<float*>> params_;
  std::vector<std::vector<float*>> targets_;  // gradient mode: what share() sends, by layer
  const bool gradient_mode_;
  const std::size_t piece_floats_;
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
  const NodeMemory* const memory_;

  std::mutex mu_;
  std::condition_variable cv_;
  // By layer, then device: a device sends layer l of t+1 only after share(l, t), so one
  // iteration per slot at a time.
  std::vector<std::vector<Share>> slots_;  // guarded by mu_
};

}  // namespace poseidon
