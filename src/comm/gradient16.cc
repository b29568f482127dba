#include "comm/gradient16.h"

#include <algorithm>
#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr std::size_t kPrefixBytes = 8;  // format, scale
constexpr std::size_t kChunk = 4096;     // floats converted at a time through a stack buffer

std::uint32_t formatCode(WireFormat format) {
  POSEIDON_ENFORCE(format != WireFormat::kFp32, "16-bit values need a 16-bit format");
  return format == WireFormat::kBf16 ? 1u : 2u;
}

// A 16-bit message of n values with its prefix written; the values' place in it.
Message makeHalf(MsgType type, WireFormat format, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                 float scale, std::size_t n, std::uint16_t** values) {
  const std::uint32_t code = formatCode(format);
  Message m = Message::make(type, key, source, iteration, halfPayloadBytes(n));
  std::memcpy(m.payload(), &code, 4);
  std::memcpy(m.payload() + 4, &scale, 4);
  *values = reinterpret_cast<std::uint16_t*>(m.payload() + kPrefixBytes);
  return m;
}

void narrow(WireFormat format, float scale, const float* in, std::uint16_t* out, std::size_t n) {
  if (format == WireFormat::kBf16) {
    toBf16(in, out, n);
  } else {
    toFp16(in, out, n, scale);
  }
}

}  // namespace

std::size_t halfPayloadBytes(std::size_t n) { return kPrefixBytes + n * sizeof(std::uint16_t); }

HalfSpan halfSpanOf(const Message& message, std::size_t n) {
  const auto& h = message.header();
  if (message.payloadBytes() != halfPayloadBytes(n)) {
    throw CommError(detail::cat("rank ", h.source, " sent ", message.payloadBytes(), " bytes of 16-bit values for KV pair ",
                                h.key, ", which holds ", n, " values"));
  }
  std::uint32_t code;
  float scale;
  std::memcpy(&code, message.payload(), 4);
  std::memcpy(&scale, message.payload() + 4, 4);
  // The payload follows a 32-byte header (or sits at a message's own buffer): 2-byte aligned.
  const auto* values = reinterpret_cast<const std::uint16_t*>(message.payload() + kPrefixBytes);
  if (code == 1) return HalfSpan{WireFormat::kBf16, 1.0f, values};
  if (code == 2 && scale > 0 && scale < 1e38f) return HalfSpan{WireFormat::kFp16, scale, values};
  throw CommError(detail::cat("rank ", h.source, " sent 16-bit values of unknown format ", code, " (scale ", scale,
                              ") for KV pair ", h.key));
}

Message packHalf(MsgType type, WireFormat format, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                 const float* values, std::size_t n) {
  const float scale = format == WireFormat::kFp16 ? fp16Scale(values, n) : 1.0f;
  std::uint16_t* out;
  Message m = makeHalf(type, format, key, source, iteration, scale, n, &out);
  narrow(format, scale, values, out, n);
  return m;
}

Message packHalfReading(MsgType type, WireFormat format, std::uint32_t key, std::uint32_t source,
                        std::uint64_t iteration, const float* values, std::size_t n, const ReadChunk& read) {
  const float scale = format == WireFormat::kFp16 ? fp16Scale(values, n) : 1.0f;
  std::uint16_t* out;
  Message m = makeHalf(type, format, key, source, iteration, scale, n, &out);
  const HalfSpan span{format, scale, out};
  float decoded[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t c = std::min(kChunk, n - i);
    narrow(format, scale, values + i, out + i, c);
    widen(span, i, decoded, c);
    read(i, decoded, c);
  }
  return m;
}

void unpackHalf(const Message& message, float* out, std::size_t n) { widen(halfSpanOf(message, n), 0, out, n); }

void addUnpacked(const Message& message, float* out, std::size_t n) {
  const HalfSpan half = halfSpanOf(message, n);
  float update[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    widen(half, i, update, m);
    for (std::size_t j = 0; j < m; ++j) out[i + j] += update[j];
  }
}

void roundThrough(WireFormat format, const float* in, float* out, std::size_t n) {
  if (format == WireFormat::kFp32) {
    std::memmove(out, in, n * sizeof(float));
    return;
  }
  const float scale = format == WireFormat::kFp16 ? fp16Scale(in, n) : 1.0f;
  std::uint16_t wire[kChunk];
  const HalfSpan span{format, scale, wire};
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    narrow(format, scale, in + i, wire, m);
    widen(span, 0, out + i, m);
  }
}

}  // namespace poseidon
