#include "comm/factors.h"

#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr std::size_t kPrefixBytes = 12;  // format, U's scale, V's scale

struct Prefix {
  std::uint32_t code;
  float u_scale;
  float v_scale;
};
static_assert(sizeof(Prefix) == kPrefixBytes, "the prefix is copied as it lies on the wire");

std::uint32_t codeOf(WireFormat format) { return format == WireFormat::kBf16 ? 1u : 2u; }

float scaleFor(WireFormat format, const float* x, std::size_t n) {
  return format == WireFormat::kFp16 ? fp16Scale(x, n) : 1.0f;
}

void narrow(WireFormat format, const float* in, std::uint16_t* out, std::size_t n, float scale) {
  if (format == WireFormat::kBf16) {
    toBf16(in, out, n);
  } else {
    toFp16(in, out, n, scale);
  }
}

bool validScale(WireFormat format, float s) { return format == WireFormat::kBf16 ? s == 1.0f : s > 0 && s < 1e38f; }

// The message's prefix, checked against the run's format.
Prefix prefixOf(const Message& m, WireFormat format) {
  const auto& h = m.header();
  Prefix p{};
  if (m.payloadBytes() < kPrefixBytes) {
    throw CommError(detail::cat("rank ", h.source, " sent 16-bit factors for layer ", h.key, " without their prefix"));
  }
  std::memcpy(&p, m.payload(), kPrefixBytes);
  if (p.code != codeOf(format) || !validScale(format, p.u_scale) || !validScale(format, p.v_scale)) {
    throw CommError(detail::cat("rank ", h.source, " sent factors for layer ", h.key, " in format ", p.code,
                                " (scales ", p.u_scale, ", ", p.v_scale, "); this run's wire is ",
                                wireFormatName(format)));
  }
  return p;
}

}  // namespace

Message packFactors16(WireFormat format, int layer, int source, std::uint64_t iteration, const float* U,
                      const float* V, std::int64_t K, std::int64_t M, std::int64_t N) {
  POSEIDON_ENFORCE(format != WireFormat::kFp32, "16-bit factors need a 16-bit format");
  const std::size_t u = static_cast<std::size_t>(K * M), v = static_cast<std::size_t>(K * N);
  Message m = Message::make(MsgType::kFactors16, static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(source),
                            iteration, kPrefixBytes + (u + v) * sizeof(std::uint16_t));
  const Prefix p{codeOf(format), scaleFor(format, U, u), scaleFor(format, V, v)};
  std::memcpy(m.payload(), &p, kPrefixBytes);
  // The payload follows a 32-byte header: 2-byte aligned.
  auto* out = reinterpret_cast<std::uint16_t*>(m.payload() + kPrefixBytes);
  narrow(format, U, out, u, p.u_scale);
  narrow(format, V, out + u, v, p.v_scale);
  return m;
}

std::int64_t factorRows(const Message& m, WireFormat format, std::int64_t M, std::int64_t N) {
  const auto& h = m.header();
  const bool half = h.type == static_cast<std::uint16_t>(MsgType::kFactors16);
  if (half != (format != WireFormat::kFp32)) {
    throw CommError(detail::cat("rank ", h.source, " sent factors for layer ", h.key, " in ", half ? "16" : "32",
                                " bits; this run's wire is ", wireFormatName(format)));
  }
  if (half) prefixOf(m, format);
  const std::size_t bytes = half ? m.payloadBytes() - kPrefixBytes : m.payloadBytes();
  const std::size_t row = static_cast<std::size_t>(M + N) * (half ? sizeof(std::uint16_t) : sizeof(float));
  if (bytes % row != 0) throw CommError(detail::cat("rank ", h.source, " sent malformed factors for layer ", h.key));
  return static_cast<std::int64_t>(bytes / row);
}

std::int64_t unpackFactors(const Message& m, WireFormat format, std::int64_t M, std::int64_t N, float* U, float* V) {
  const std::int64_t K = factorRows(m, format, M, N);
  const std::size_t u = static_cast<std::size_t>(K * M), v = static_cast<std::size_t>(K * N);
  if (format == WireFormat::kFp32) {
    std::memcpy(U, m.floats(), u * sizeof(float));
    std::memcpy(V, m.floats() + u, v * sizeof(float));
    return K;
  }
  const Prefix p = prefixOf(m, format);
  const auto* in = reinterpret_cast<const std::uint16_t*>(m.payload() + kPrefixBytes);
  widen(HalfSpan{format, p.u_scale, in}, 0, U, u);
  widen(HalfSpan{format, p.v_scale, in + u}, 0, V, v);
  return K;
}

}  // namespace poseidon
