#include "common/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POSEIDON_X86 1
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/names.h"
#include "poseidon/options.h"

namespace poseidon {

namespace {

constexpr NameTable<WireFormat, 3> kWireFormats{
    {{WireFormat::kFp32, "fp32"}, {WireFormat::kBf16, "bf16"}, {WireFormat::kFp16, "fp16"}}};

}  // namespace

std::string wireFormatName(WireFormat format) { return nameIn(kWireFormats, format); }

WireFormat parseWireFormat(const std::string& text) {
  if (const WireFormat* w = valueIn(kWireFormats, text)) return *w;
  throw OptionError("{wire=" + text + "}: use fp32 (exact), bf16 or fp16");
}

void checkErrorFeedback(WireFormat wire, bool error_feedback) {
  if (error_feedback && wire == WireFormat::kFp32) {
    throw OptionError("{error_feedback=true} keeps what a 16-bit wire's rounding loses; {wire=fp32} rounds nothing: "
                      "use {wire=bf16} or {wire=fp16}");
  }
}

namespace {

std::uint32_t bitsOf(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float floatOfBits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// torch's c10::BFloat16 rounding: to nearest, ties to even; NaN becomes a quiet NaN.
std::uint16_t bf16Of(float x) {
  const std::uint32_t u = bitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float floatOfBf16(std::uint16_t h) { return floatOfBits(static_cast<std::uint32_t>(h) << 16); }

// IEEE binary16, round to nearest even (what F16C's vcvtps2ph does), for CPUs without
// F16C and for the tails of the vector loops.
std::uint16_t fp16Of(float x) {
  const std::uint32_t u = bitsOf(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // from 65520 up (65504's tie): inf
  if (a >= 0x38800000u) {  // a normal half (>= 2^-14): rebias the exponent, round 23 mantissa bits to 10
    std::uint32_t v = a - 0x38000000u;
    v += 0xfffu + ((v >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (v >> 13));
  }
  // A subnormal half (units of 2^-24), or 0: the scaling is exact, nearbyint rounds to even.
  const auto units = static_cast<std::uint32_t>(std::nearbyint(floatOfBits(a) * 16777216.0f));
  return static_cast<std::uint16_t>(sign | units);  // 1024 units is the smallest normal's encoding
}

float floatOfFp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return floatOfBits(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) return std::copysign(static_cast<float>(mantissa) / 16777216.0f, sign ? -1.0f : 1.0f);
  return floatOfBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// The largest |x| as bits: IEEE magnitudes order as integers, and inf and NaN above every
// finite value.
std::uint32_t maxMagnitudeScalar(const float* in, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, bitsOf(in[i]) & 0x7fffffffu);
  return m;
}

struct Kernels {
  void (*to_bf16)(const float*, std::uint16_t*, std::size_t);
  void (*from_bf16)(const std::uint16_t*, float*, std::size_t);
  void (*to_fp16)(const float*, std::uint16_t*, std::size_t, float);
  void (*from_fp16)(const std::uint16_t*, float*, std::size_t, float);
  std::uint32_t (*max_magnitude)(const float*, std::size_t);
  const char* name;
};

void toBf16Scalar(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16Of(in[i]);
}
void fromBf16Scalar(const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = floatOfBf16(in[i]);
}
void toFp16Scalar(const float* in, std::uint16_t* out, std::size_t n, float scale) {
  for (std::size_t i = 0; i < n; ++i) out[i] = fp16Of(in[i] * scale);
}
void fromFp16Scalar(const std::uint16_t* in, float* out, std::size_t n, float inverse) {
  for (std::size_t i = 0; i < n; ++i) out[i] = floatOfFp16(in[i]) * inverse;
}

#ifdef POSEIDON_X86
#define POSEIDON_AVX2 __attribute__((target("avx2,f16c")))

// 16 floats a step: two vectors of 32-bit results packed into one of 16-bit ones.
POSEIDON_AVX2 __m256i bf16Bits(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7fc0), nan);
}

POSEIDON_AVX2 void toBf16Avx2(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16Bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    const __m256i b = bf16Bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // packus works within 128-bit lanes: a0-3 b0-3 a4-7 b4-7, put back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  toBf16Scalar(in + i, out + i, n - i);
}

POSEIDON_AVX2 void fromBf16Avx2(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(wide, 16));
  }
  fromBf16Scalar(in + i, out + i, n - i);
}

POSEIDON_AVX2 void toFp16Avx2(const float* in, std::uint16_t* out, std::size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(in + i), s);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  toFp16Scalar(in + i, out + i, n - i, scale);
}

POSEIDON_AVX2 void fromFp16Avx2(const std::uint16_t* in, float* out, std::size_t n, float inverse) {
  const __m256 s = _mm256_set1_ps(inverse);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(x, s));
  }
  fromFp16Scalar(in + i, out + i, n - i, inverse);
}

POSEIDON_AVX2 std::uint32_t maxMagnitudeAvx2(const float* in, std::size_t n) {
  const __m256i mask = _mm256_set1_epi32(0x7fffffff);
  __m256i m = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    m = _mm256_max_epu32(m, _mm256_and_si256(u, mask));
  }
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  std::uint32_t best = maxMagnitudeScalar(in + i, n - i);
  for (std::uint32_t v : lanes) best = std::max(best, v);
  return best;
}

#endif  // POSEIDON_X86

const Kernels& kernels() {
  static const Kernels chosen = [] {
#ifdef POSEIDON_X86
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
      return Kernels{toBf16Avx2, fromBf16Avx2, toFp16Avx2, fromFp16Avx2, maxMagnitudeAvx2, "avx2+f16c"};
    }
#endif
    return Kernels{toBf16Scalar, fromBf16Scalar, toFp16Scalar, fromFp16Scalar, maxMagnitudeScalar, "scalar"};
  }();
  return chosen;
}

}  // namespace

void toBf16(const float* in, std::uint16_t* out, std::size_t n) { kernels().to_bf16(in, out, n); }
void fromBf16(const std::uint16_t* in, float* out, std::size_t n) { kernels().from_bf16(in, out, n); }

float fp16Scale(const float* in, std::size_t n) {
  const std::uint32_t bits = kernels().max_magnitude(in, n);
  if (bits == 0 || bits >= 0x7f800000u) return 1.0f;  // all zero, or inf / NaN: sent as they are
  int exponent = 0;
  std::frexp(floatOfBits(bits), &exponent);  // largest in [2^(e-1), 2^e)
  // Bounded so the scale and its inverse are both finite floats.
  const int shift = std::max(-120, std::min(120, 15 - exponent));
  return std::ldexp(1.0f, shift);
}

void toFp16(const float* in, std::uint16_t* out, std::size_t n, float scale) { kernels().to_fp16(in, out, n, scale); }
void fromFp16(const std::uint16_t* in, float* out, std::size_t n, float scale) {
  kernels().from_fp16(in, out, n, 1.0f / scale);
}

const char* halfKernels() { return kernels().name; }

namespace half_scalar {
void toBf16(const float* in, std::uint16_t* out, std::size_t n) { toBf16Scalar(in, out, n); }
void fromBf16(const std::uint16_t* in, float* out, std::size_t n) { fromBf16Scalar(in, out, n); }
void toFp16(const float* in, std::uint16_t* out, std::size_t n, float scale) { toFp16Scalar(in, out, n, scale); }
void fromFp16(const std::uint16_t* in, float* out, std::size_t n, float inverse_scale) {
  fromFp16Scalar(in, out, n, inverse_scale);
}
}  // namespace half_scalar

void widen(const HalfSpan& span, std::size_t from, float* out, std::size_t n) {
  if (span.format == WireFormat::kBf16) {
    fromBf16(span.values + from, out, n);
  } else {
    fromFp16(span.values + from, out, n, span.scale);
  }
}

}  // namespace poseidon
