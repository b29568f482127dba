// The wire form of one worker's sufficient factors of an FC layer: U (K x M) followed by
// V (K x N), one message. Used by SFB (worker to worker) and by the 2015 paper's
// strategy (worker to shard).
#pragma once

#include <cstdint>
#include <cstring>

#include "comm/message.h"

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

}  // namespace poseidon
