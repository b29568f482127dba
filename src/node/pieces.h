// Inside a node, a layer's values travel in pieces of at most a KV pair's size: one huge
// message crawls through MPI's shared-memory and loopback paths (a 100 MB gradient took
// 2.7 s from device to leader on one host), while pieces in flight together move at the
// rate the parameter server's pairs do. The message key carries the layer (low 16 bits),
// the piece's index (15 bits) and whether it is the last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "comm/message.h"

namespace poseidon {

// Where a layer's values are, in order (tensors, or U then V).
using FloatSpans = std::vector<std::pair<const float*, std::size_t>>;
// Where they go.
using FloatTargets = std::vector<std::pair<float*, std::size_t>>;

struct PieceKey {
  int layer = 0;
  int index = 0;
  bool last = false;
  static PieceKey of(std::uint32_t key) {
    return PieceKey{static_cast<int>(key & 0xffffu), static_cast<int>((key >> 16) & 0x7fffu), (key >> 31) != 0};
  }
};

// The key of a layer that travels whole (one piece, the last).
inline std::uint32_t wholeLayerKey(int layer) { return static_cast<std::uint32_t>(layer) | 1u << 31; }
// Copies `spans`, in order, to `out`.
void gatherInto(const FloatSpans& spans, float* out);
// Copies (or, with `add`, adds) consecutive floats from `src` across `outs`.
void scatterFrom(const float* src, const FloatTargets& outs, bool add);

// Copies `spans` into messages of at most `piece_floats` floats each (more where that would
// make over 32767 pieces; at least one message, empty if there is nothing to send). Throws
// Error past 65535 layers.
std::vector<Message> cutIntoPieces(MsgType type, int layer, int source, std::uint64_t iteration,
                                   const FloatSpans& spans, std::size_t piece_floats);

// The pieces of one layer from one sender, gathered until the last is in.
class PieceAssembly {
 public:
  // Throws CommError on a duplicate piece or a piece of another iteration.
  void add(Message piece);
  bool empty() const { return pieces_.empty(); }
  bool complete() const { return total_ > 0 && received_ == total_; }
  std::uint64_t iteration() const { return iteration_; }
  MsgType type() const { return type_; }
  std::size_t floats() const;
  // Copies the values, in order, to `out` (floats() of them); then the assembly is empty.
  void takeInto(float* out);
  std::vector<float> take();
  // Copies (or, with `add`, adds) the values in order across `outs`, straight from the
  // pieces: `outs` must hold floats() in all.
  void scatterInto(const FloatTargets& outs, bool add) const;

 private:
  std::vector<Message> pieces_;  // by index
  int received_ = 0;
  int total_ = 0;  // known once the last piece is in
  std::uint64_t iteration_ = 0;
  MsgType type_ = MsgType::kNodeGrad;
};

}  // namespace poseidon
