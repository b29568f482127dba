// A KV pair's gradient in 16 bits on the wire (MsgType::kPushGrad16, issue 38): the
// payload is the format (u32: 1 bf16, 2 fp16), fp16's power-of-two scale (f32; 1 for
// bf16), then one u16 per float. The shard decodes it to fp32 before it sums, so every sum
// and every optimizer step stays fp32; a worker's own pair on its own shard goes through
// roundThrough, so every contribution is rounded alike wherever its shard lives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/message.h"
#include "common/half.h"

namespace poseidon {

// `format` is bf16 or fp16.
Message packGradient16(WireFormat format, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                       const float* grad, std::size_t n);
// The message's n floats into `out`; CommError unless it holds n values of a known format.
void unpackGradient16(const Message& message, float* out, std::size_t n);
// What a shard receives of `in` sent as packGradient16 does.
void roundThrough(WireFormat format, const float* in, float* out, std::size_t n);

}  // namespace poseidon
