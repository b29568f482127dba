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

// The message's format and scale, its length checked against n.
struct Half {
  WireFormat format;
  float scale;
  const std::uint16_t* values;
};

Half readHalf(const Message& message, std::size_t n) {
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
  if (code == 1) return Half{WireFormat::kBf16, 1.0f, values};
  if (code == 2 && scale > 0 && scale < 1e38f) return Half{WireFormat::kFp16, scale, values};
  throw CommError(detail::cat("rank ", h.source, " sent 16-bit values of unknown format ", code, " (scale ", scale,
                              ") for KV pair ", h.key));
}

void widen(const Half& half, std::size_t from, float* out, std::size_t n) {
  if (half.format == WireFormat::kBf16) {
    fromBf16(half.values + from, out, n);
  } else {
    fromFp16(half.values + from, out, n, half.scale);
  }
}

}  // namespace

std::size_t halfPayloadBytes(std::size_t n) { return kPrefixBytes + n * sizeof(std::uint16_t); }

Message packHalf(MsgType type, WireFormat format, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                 const float* values, std::size_t n) {
  const std::uint32_t code = formatCode(format);
  Message m = Message::make(type, key, source, iteration, halfPayloadBytes(n));
  const float scale = format == WireFormat::kFp16 ? fp16Scale(values, n) : 1.0f;
  std::memcpy(m.payload(), &code, 4);
  std::memcpy(m.payload() + 4, &scale, 4);
  auto* out = reinterpret_cast<std::uint16_t*>(m.payload() + kPrefixBytes);
  if (format == WireFormat::kBf16) {
    toBf16(values, out, n);
  } else {
    toFp16(values, out, n, scale);
  }
  return m;
}

void unpackHalf(const Message& message, float* out, std::size_t n) { widen(readHalf(message, n), 0, out, n); }

void addUnpacked(const Message& message, float* out, std::size_t n) {
  const Half half = readHalf(message, n);
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
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    if (format == WireFormat::kBf16) {
      toBf16(in + i, wire, m);
      fromBf16(wire, out + i, m);
    } else {
      toFp16(in + i, wire, m, scale);
      fromFp16(wire, out + i, m, scale);
    }
  }
}

}  // namespace poseidon
