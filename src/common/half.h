// 16-bit floats for the wire (issue 38): gradients and factors may travel as bfloat16 or
// IEEE half while every sum and every optimizer step stays fp32. Conversions round to
// nearest, ties to even, bit for bit as torch's `.to(torch.bfloat16)` / `.half()` (the unit
// test compares them); NaN stays NaN. Vectorised with AVX2 and F16C where the CPU has them
// (chosen once, at first use), a scalar loop elsewhere with the same results.
//
// fp16 keeps 5 exponent bits: a gradient of 1e5 would overflow and one of 1e-8 would vanish.
// So fp16 travels with a per-tensor power-of-two scale (fp16Scale) that puts the largest
// magnitude just below 2^15, far from the format's 65504, and is divided out on arrival;
// a power of two changes no mantissa bit. bf16 has fp32's exponent range and needs none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace poseidon {

// How gradients travel: exact fp32 (the default), or 16 bits.
enum class WireFormat { kFp32, kBf16, kFp16 };
std::string wireFormatName(WireFormat format);  // "fp32", "bf16", "fp16"
// Throws OptionError ({wire=text}) unless text is one of the names.
WireFormat parseWireFormat(const std::string& text);
inline std::size_t wireBytesPerFloat(WireFormat format) { return format == WireFormat::kFp32 ? 4 : 2; }
// Error feedback keeps what each rounding lost for the next step; on fp32 there is none.
// Throws OptionError ({error_feedback=true}, {wire=fp32}) for that.
void checkErrorFeedback(WireFormat wire, bool error_feedback);
// How SFB factors travel: fp32 under error feedback (a batch's factor rows are new every
// step, and what rounding them loses is a dense matrix that factors cannot carry), else as
// the wire.
inline WireFormat factorWireOf(WireFormat wire, bool error_feedback) {
  return error_feedback ? WireFormat::kFp32 : wire;
}

void toBf16(const float* in, std::uint16_t* out, std::size_t n);
void fromBf16(const std::uint16_t* in, float* out, std::size_t n);

// The power of two to multiply `in` by before toFp16: max |x| * scale lies in [2^14, 2^15)
// (1 when every x is 0; 1 when one is not finite, which then arrives as it is, inf or NaN,
// as an overflowing step does under torch's GradScaler).
float fp16Scale(const float* in, std::size_t n);
// out[i] = half(in[i] * scale)
void toFp16(const float* in, std::uint16_t* out, std::size_t n, float scale);
// out[i] = float(in[i]) / scale
void fromFp16(const std::uint16_t* in, float* out, std::size_t n, float scale);

// 16-bit values as they arrived (a push's payload): read in place, widened a block at a
// time where they are used, so no fp32 copy of the whole message is made.
struct HalfSpan {
  WireFormat format = WireFormat::kBf16;
  float scale = 1.0f;  // fp16's: the values are half(x * scale)
  const std::uint16_t* values = nullptr;
};
// out[0, n) = the span's floats [from, from + n).
void widen(const HalfSpan& span, std::size_t from, float* out, std::size_t n);

// One contribution to a sum as the step reads it: fp32, or 16-bit values off the wire that
// are widened a block at a time as they are summed (no fp32 copy of them is made; the sum
// is the same, bit for bit, as of the widened copy).
struct GradientView {
  const float* fp32 = nullptr;  // null: `half`
  HalfSpan half;
  // The same contribution from its value k on.
  GradientView from(std::size_t k) const {
    return fp32 != nullptr ? GradientView{fp32 + k, {}}
                           : GradientView{nullptr, HalfSpan{half.format, half.scale, half.values + k}};
  }
};

// Which code converts on this CPU: "avx2+f16c" or "scalar" (benchmarks print it).
const char* halfKernels();

// The portable kernels, which every CPU's must equal bit for bit (ranks on different CPUs
// hold one replica): for the tests, which compare both with torch.
namespace half_scalar {
void toBf16(const float* in, std::uint16_t* out, std::size_t n);
void fromBf16(const std::uint16_t* in, float* out, std::size_t n);
void toFp16(const float* in, std::uint16_t* out, std::size_t n, float scale);
void fromFp16(const std::uint16_t* in, float* out, std::size_t n, float inverse_scale);
}  // namespace half_scalar

}  // namespace poseidon
