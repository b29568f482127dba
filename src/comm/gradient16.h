// Floats of one KV pair in 16 bits on the wire (issue 38): a worker's gradient push
// (MsgType::kPushGrad16) and a shard's update back (kParams16: new values minus old) or, in
// gradient mode, its mean gradient (kMeanGrad16). The
// payload is the format (u32: 1 bf16, 2 fp16), fp16's power-of-two scale (f32; 1 for
// bf16), then one u16 per float. Every sum and every optimizer step stays fp32: a shard
// widens pushes block by block as it sums them, and rounds its update the way the workers
// will read it, so every replica (the shard's values included) is old + the same rounded
// update, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "comm/message.h"
#include "common/half.h"

namespace poseidon {

// `format` is bf16 or fp16; `type` kPushGrad16, kParams16 or kMeanGrad16.
Message packHalf(MsgType type, WireFormat format, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                 const float* values, std::size_t n);
// packHalf, and in the same pass over the values (a chunk at a time, while it is in cache)
// `read(from, floats, m)` gets what a receiver will read of values [from, from + m): for
// error feedback's residual and a shard's own copy of its update.
using ReadChunk = std::function<void(std::size_t from, const float* read, std::size_t m)>;
Message packHalfReading(MsgType type, WireFormat format, std::uint32_t key, std::uint32_t source,
                        std::uint64_t iteration, const float* values, std::size_t n, const ReadChunk& read);
// The message's 16-bit values in place; CommError unless it holds n values of a known format.
HalfSpan halfSpanOf(const Message& message, std::size_t n);
// The message's n floats into `out`; checked as halfSpanOf.
void unpackHalf(const Message& message, float* out, std::size_t n);
// out[i] += the message's i-th float (a kParams16 update onto a replica); checked as unpackHalf.
void addUnpacked(const Message& message, float* out, std::size_t n);
// What a receiver of packHalf(`in`) reads (fp32: `in` itself).
void roundThrough(WireFormat format, const float* in, float* out, std::size_t n);
// The payload bytes of n floats in 16 bits.
std::size_t halfPayloadBytes(std::size_t n);

}  // namespace poseidon
