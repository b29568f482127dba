#include "comm/gradient16.h"

#include <algorithm>
#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr std::size_t kPrefixBytes = 8;  // format, scale

std::uint32_t formatCode(WireFormat format) {
  POSEIDON_ENFORCE(format != WireFormat::kFp32, "a 16-bit gradient needs a 16-bit format");
  return format == WireFormat::kBf16 ? 1u : 2u;
}

}  // namespace

Message packGradient16(WireFormat format, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                       const float* grad, std::size_t n) {
  const std::uint32_t code = formatCode(format);
  Message m = Message::make(MsgType::kPushGrad16, key, source, iteration, kPrefixBytes + n * sizeof(std::uint16_t));
  const float scale = format == WireFormat::kFp16 ? fp16Scale(grad, n) : 1.0f;
  std::memcpy(m.payload(), &code, 4);
  std::memcpy(m.payload() + 4, &scale, 4);
  // The payload follows a 32-byte header at an 8-byte offset: 2-byte aligned.
  auto* values = reinterpret_cast<std::uint16_t*>(m.payload() + kPrefixBytes);
  if (format == WireFormat::kBf16) {
    toBf16(grad, values, n);
  } else {
    toFp16(grad, values, n, scale);
  }
  return m;
}

void unpackGradient16(const Message& message, float* out, std::size_t n) {
  const auto& h = message.header();
  if (message.payloadBytes() != kPrefixBytes + n * sizeof(std::uint16_t)) {
    throw CommError(detail::cat("rank ", h.source, " pushed ", message.payloadBytes(), " bytes of 16-bit gradient for KV pair ",
                                h.key, ", which holds ", n, " values"));
  }
  std::uint32_t code;
  float scale;
  std::memcpy(&code, message.payload(), 4);
  std::memcpy(&scale, message.payload() + 4, 4);
  const auto* values = reinterpret_cast<const std::uint16_t*>(message.payload() + kPrefixBytes);
  if (code == 1) {
    fromBf16(values, out, n);
  } else if (code == 2 && scale > 0 && scale < 1e38f) {
    fromFp16(values, out, n, scale);
  } else {
    throw CommError(detail::cat("rank ", h.source, " pushed a 16-bit gradient of unknown format ", code, " (scale ",
                                scale, ") for KV pair ", h.key));
  }
}

void roundThrough(WireFormat format, const float* in, float* out, std::size_t n) {
  if (format == WireFormat::kFp32) {
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
  const float scale = format == WireFormat::kFp16 ? fp16Scale(in, n) : 1.0f;
  constexpr std::size_t kChunk = 4096;
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
