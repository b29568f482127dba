// The wire form of one worker's sufficient factors of an FC layer: U (K x M) followed by
// V (K x N), one message. Used by SFB (worker to worker) and by the 2015 paper's
// strategy (worker to shard).
//
// On a 16-bit wire (issue 38) SFB's factors travel as kFactors16: the format (u32: 1 bf16,
// 2 fp16), U's and V's fp16 scales (f32 each, 1 for bf16: a scale each, since U holds
// output gradients and V activations, magnitudes apart), then U's and V's values, a u16
// each. A worker reads its own share from the same message as its peers do, so every
// replica reconstructs from the same rounded factors.
#pragma once

#include <cstdint>
#include <cstring>

#include "comm/message.h"
#include "common/half.h"

namespace poseidon {

inline Message packFactors(MsgType type, int layer, int source, std::uint64_t iteration, const float* U, const float* V,
                           std::int64_t K, std::int64_t M, std::int64_t N) {
  const std::size_t u = static_cast<std::size_t>(K * M), v = static_cast<std::size_t>(K * N);
  Message m = Message::make(type, static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(source), iteration,
                            (u + v) * sizeof(float));
  std::memcpy(m.floats(), U, u * sizeof(float));
  std::memcpy(m.floats() + u, V, v * sizeof(float));
  return m;
}

// kFactors16 of `format` (bf16 or fp16).
Message packFactors16(WireFormat format, int layer, int source, std::uint64_t iteration, const float* U,
                      const float* V, std::int64_t K, std::int64_t M, std::int64_t N);
// The rows K of a kFactors or kFactors16 message of an M x N layer; CommError when its size
// fits no whole number of rows or its 16-bit format is not `format`.
std::int64_t factorRows(const Message& m, WireFormat format, std::int64_t M, std::int64_t N);
// Its U (K x M) and V (K x N) as floats; returns K. Checked as factorRows.
std::int64_t unpackFactors(const Message& m, WireFormat format, std::int64_t M, std::int64_t N, float* U, float* V);

}  // namespace poseidon
