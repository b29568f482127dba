// Shared memory between the ranks of one node (the 2015 paper's devices inside a machine
// share its memory). A device writes a layer's gradient into its slot and the leader adds
// it from there; the leader writes the layer's fresh values once and every device copies
// them out. Only a small message crosses the transport to say "it is there": the bytes no
// longer pass through TCP loopback (four copies and the kernel's protocol work each way),
// which on a host whose cores also compute cost more than the link saved.
//
// No locks guard the slots: the devices level's order does. A device writes layer l of
// iteration t+1 only after it took the leader's values of (l, t), which the leader shares
// only after it has added the device's (l, t); the leader writes (l, t+1) only after every
// device sent (l, t+1), which each does only after it copied (l, t) out.
//
// Made by the leader (POSIX shm_open) and opened by name by its devices; the name is
// unlinked once everyone has it mapped (or start-up failed), so nothing is left behind when
// the job dies later; only a process killed during start-up leaves a /dev/shm/poseidon-*
// file. A node
// whose ranks cannot all map it (on different hosts, no room in /dev/shm) goes on with
// messages (node/pieces.h).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/control_channel.h"
#include "coordinator/node_map.h"
#include "poseidon/model_info.h"

namespace poseidon {

class NodeMemory {
 public:
  // Collective over every rank (nodes or not). `gathered[l]`: layer l's devices send their
  // gradient (not sufficient factors) to the leader, so it gets a slot per device. Returns
  // null where this rank's node goes by messages.
  static std::unique_ptr<NodeMemory> open(ControlChannel& control, const NodeMap& nodes, int rank,
                                          const ModelInfo& model, const std::vector<bool>& gathered);
  ~NodeMemory();
  NodeMemory(const NodeMemory&) = delete;
  NodeMemory& operator=(const NodeMemory&) = delete;

  // Where device `device` (0: the leader's first device) puts layer l's gradient, all its
  // tensors in order; null for a layer without slots.
  float* slot(int layer, int device) const;
  // Where the leader puts layer l's values for its devices.
  float* values(int layer) const;
  std::size_t bytes() const { return bytes_; }

 private:
  NodeMemory(void* base, std::size_t bytes, std::vector<std::size_t> slots, std::vector<std::size_t> values,
             std::vector<std::size_t> slot_floats);

  void* base_;
  std::size_t bytes_;
  std::vector<std::size_t> slots_;        // by layer: byte offset of device 0's slot (or npos)
  std::vector<std::size_t> values_;       // by layer: byte offset of the values
  std::vector<std::size_t> slot_floats_;  // by layer: floats between one device's slot and the next
};

}  // namespace poseidon
