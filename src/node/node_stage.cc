#include "node/node_stage.h"

#include <atomic>
#include <cstring>
#include <utility>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

std::size_t layerFloats(const LayerInfo& layer) {
  std::size_t n = 0;
  for (const auto& t : layer.tensors) n += static_cast<std::size_t>(t.numel());
  return n;
}

}  // namespace

NodeStage::NodeStage(const ModelInfo& model, Transport& world, const NodeMap& nodes,
                     std::vector<std::vector<float*>> params, bool gradient_mode, std::size_t piece_floats,
                     std::chrono::milliseconds timeout, const FailureState& failure, const NodeMemory* memory)
    : model_(model),
      world_(world),
      devices_(nodes.devicesBesideLeader(nodes.nodeOf(world.rank()))),
      first_device_(world.rank() + 1),
      params_(std::move(params)),
      targets_(model.layers.size()),
      gradient_mode_(gradient_mode),
      piece_floats_(piece_floats),
      timeout_(timeout),
      failure_(failure),
      memory_(memory),
      slots_(model.layers.size(), std::vector<Share>(devices_.size())) {}

void NodeStage::deliver(Message m) {
  const auto& h = m.header();
  const int device = static_cast<int>(h.source) - first_device_;
  const PieceKey key = PieceKey::of(h.key);
  if (device < 0 || device >= static_cast<int>(devices_.size())) {
    throw CommError(detail::cat("rank ", h.source, " sent a device's share of layer ", key.layer, " to rank ",
                                world_.rank(), ", which does not lead its node"));
  }
  if (key.layer >= static_cast<int>(slots_.size())) {
    throw CommError(detail::cat("rank ", h.source, " sent a share of layer ", key.layer, " but the model has ",
                                slots_.size(), " layers: the ranks of a node run different models"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Share& share = slots_[key.layer][device];
    if (m.type() != MsgType::kNodeGradShared) {
      if (share.in_memory) throw CommError(detail::cat("rank ", h.source, " sent layer ", key.layer, " twice"));
      share.pieces.add(std::move(m));
    } else if (!memory_ || !memory_->slot(key.layer, device) || share.in_memory || !share.pieces.empty()) {
      throw CommError(detail::cat("rank ", h.source, " put layer ", key.layer,
                                  " in shared memory, which its leader, rank ", world_.rank(), ", ",
                                  memory_ ? "does not expect there now" : "does not have"));
    } else {
      share.in_memory = true;
      share.memory_iteration = h.iteration;
    }
  }
  cv_.notify_all();
}

std::vector<NodeStage::Share> NodeStage::take(int layer, std::uint64_t t, MsgType type) {
  std::vector<Share> out(devices_.size());
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto& slots = slots_[layer];
    const auto all_in = [&] {
      for (const auto& s : slots) {
        if (!s.complete()) return false;
      }
      return true;
    };
    try {
      waitFor(lock, cv_, all_in, timeout_, &failure_,
              detail::cat("rank ", world_.rank(), ": the devices' share of layer '", model_.layers[layer].name,
                          "' for iteration ", t));
    } catch (const TimeoutError& e) {
      std::string who;
      for (std::size_t d = 0; d < slots.size(); ++d) {
        if (!slots[d].complete()) who += detail::cat(who.empty() ? "" : ", ", devices_[d]);
      }
      throw CulpritTimeout(detail::cat(e.what(), "; not all of it from rank ", who, " of this node (lost or stalled)"),
                           true);
    }
    // Moved out, not copied: the transport thread delivers under this lock.
    for (std::size_t d = 0; d < slots.size(); ++d) out[d] = std::exchange(slots[d], Share());
  }
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (out[d].iteration() != t || out[d].type() != type) {
      throw CommError(detail::cat("rank ", devices_[d], " sent layer '", model_.layers[layer].name, "' of iteration ",
                                  out[d].iteration(), " as message type ", static_cast<int>(out[d].type()),
                                  " while its leader syncs iteration ", t,
                                  ": the ranks of a node run different plans"));
    }
  }
  return out;
}

void NodeStage::addDeviceGradients(int layer, std::uint64_t t, const std::vector<float*>& grads) {
  const LayerInfo& info = model_.layers[layer];
  POSEIDON_ENFORCE_EQ(grads.size(), info.tensors.size(), "gradients of layer ", layer);
  if (gradient_mode_) targets_[layer] = grads;
  const auto arrived = take(layer, t, MsgType::kNodeGrad);
  FloatTargets sums;
  for (std::size_t k = 0; k < grads.size(); ++k)
    sums.emplace_back(grads[k], static_cast<std::size_t>(info.tensors[k].numel()));
  // Device by device in rank order, as the flat run's sums go (to rounding: they are
  // grouped by node there).
  for (std::size_t d = 0; d < arrived.size(); ++d) {
    if (arrived[d].in_memory) {
      std::atomic_thread_fence(std::memory_order_acquire);
      scatterFrom(memory_->slot(layer, static_cast<int>(d)), sums, true);
      continue;
    }
    const PieceAssembly& pieces = arrived[d].pieces;
    if (pieces.floats() != layerFloats(info)) {
      throw CommError(detail::cat("rank ", devices_[d], " sent ", pieces.floats(), " gradient values for layer '",
                                  info.name, "', which has ", layerFloats(info)));
    }
    pieces.scatterInto(sums, true);
  }
}

Message NodeStage::stackDeviceFactors(int layer, std::uint64_t t, Message own) {
  const LayerInfo& info = model_.layers[layer];
  const auto arrived = take(layer, t, MsgType::kNodeFactors);
  const std::size_t row = static_cast<std::size_t>(info.M + info.N);
  std::size_t rows = own.floatCount() / row;
  for (std::size_t d = 0; d < arrived.size(); ++d) {
    if (arrived[d].pieces.floats() % row != 0) {
      throw CommError(detail::cat("rank ", devices_[d], " sent malformed factors for layer '", info.name, "'"));
    }
    rows += arrived[d].pieces.floats() / row;
  }
  const auto& h = own.header();
  Message node = Message::make(own.type(), h.key, h.source, h.iteration, rows * row * sizeof(float));
  // U blocks first (K x M each, leader then devices), then the V blocks in the same order.
  float* u = node.floats();
  float* v = node.floats() + rows * static_cast<std::size_t>(info.M);
  const auto split = [&](std::size_t floats) {
    const std::size_t k = floats / row;
    const std::size_t um = k * static_cast<std::size_t>(info.M), vn = k * static_cast<std::size_t>(info.N);
    FloatTargets to{{u, um}, {v, vn}};
    u += um;
    v += vn;
    return to;
  };
  const auto mine = split(own.floatCount());
  std::memcpy(mine[0].first, own.floats(), mine[0].second * sizeof(float));
  std::memcpy(mine[1].first, own.floats() + mine[0].second, mine[1].second * sizeof(float));
  for (const auto& a : arrived) a.pieces.scatterInto(split(a.pieces.floats()), false);
  return node;
}

void NodeStage::setGradientTarget(int layer, std::vector<float*> grads) { targets_[layer] = std::move(grads); }

void NodeStage::share(int layer, std::uint64_t t) {
  if (devices_.empty()) return;
  const LayerInfo& info = model_.layers[layer];
  const auto& from = gradient_mode_ ? targets_[layer] : params_[layer];
  POSEIDON_ENFORCE_EQ(from.size(), info.tensors.size(), "tensors of layer ", layer, " to share in the node");
  FloatSpans spans;
  for (std::size_t k = 0; k < from.size(); ++k)
    spans.emplace_back(from[k], static_cast<std::size_t>(info.tensors[k].numel()));
  if (memory_) {
    // Once for all devices; each copies them out before it sends this layer again, and
    // only then can share() of the next iteration come here (node_memory.h).
    gatherInto(spans, memory_->values(layer));
    std::atomic_thread_fence(std::memory_order_release);
    Message word = Message::make(MsgType::kNodeParamsShared, wholeLayerKey(layer),
                                 static_cast<std::uint32_t>(world_.rank()), t, 0);
    word.setPriority(layer);
    for (int d : devices_) world_.send(d, word);
    return;
  }
  // Copied: the devices share the pieces, and the next iteration may change these values.
  const auto pieces = cutIntoPieces(MsgType::kNodeParams, layer, world_.rank(), t, spans, piece_floats_);
  for (int d : devices_) {
    for (const auto& m : pieces) world_.send(d, m);
  }
}

}  // namespace poseidon
