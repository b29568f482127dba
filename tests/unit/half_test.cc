// 16-bit wire formats (src/common/half.h) against torch's own conversions, bit for bit:
// random values over many magnitudes, every tie, subnormals, the largest halves, zeros of
// both signs, infinities and NaN. The kernels this CPU uses and the portable ones are both
// compared: ranks on CPUs with and without AVX2 must round alike.
#include "common/half.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "poseidon/options.h"

namespace poseidon {
namespace {

float ofBits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Random magnitudes from 2^-30 to 2^20, both signs, then the special and boundary values,
// each also at a position the scalar tail handles.
std::vector<float> testValues() {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::vector<float> v;
  for (int i = 0; i < 20000; ++i) v.push_back(std::ldexp(normal(gen), exponent(gen)));
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                                65504.0f, 65519.0f, 65520.0f, 65536.0f, -65520.0f, 6.1035156e-05f /* 2^-14 */,
                                6.0e-05f, 5.96e-08f /* 2^-24 */, 2.98e-08f, 3.0e-08f, 1e-45f, 3.4e38f,
                                std::numeric_limits<float>::max(), std::numeric_limits<float>::min()};
  // Ties of both formats: the bits below the kept ones exactly half, with odd and even kept ends.
  for (std::uint32_t base : {0x3f800000u, 0x3f810000u, 0x47000000u, 0x38800000u}) {
    special.push_back(ofBits(base | 0x8000u));             // a bf16 tie
    special.push_back(ofBits(base | 0x18000u));            // a bf16 tie, odd end
    special.push_back(ofBits(base | 0x1000u));             // an fp16 tie
    special.push_back(ofBits(base | 0x3000u));             // an fp16 tie, odd end
  }
  for (int i = 1; i <= 40; ++i) special.push_back(std::ldexp(static_cast<float>(i) + 0.5f, -24));  // subnormal ties
  v.insert(v.end(), special.begin(), special.end());
  v.insert(v.begin(), special.begin(), special.end());
  v.push_back(1.5f);  // odd length: a tail of the scalar code
  return v;
}

torch::Tensor tensorOf(std::vector<float>& v) {
  return torch::from_blob(v.data(), {static_cast<std::int64_t>(v.size())}, torch::kFloat32);
}

// NaN's bits are torch's own choice per path (its scalar and vector code differ): NaN must
// stay NaN; every other value must match exactly.
template <typename Half>
void expectSameBits(const std::vector<float>& in, const std::vector<std::uint16_t>& ours, const torch::Tensor& theirs) {
  const auto* t = theirs.data_ptr<Half>();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(static_cast<float>(t[i]))) << i;
      EXPECT_GT(ours[i] & 0x7fffu, ours[i] == 0x7fc0 ? 0x7f80u : 0x7c00u) << i;
      continue;
    }
    ASSERT_EQ(ours[i], t[i].x) << "value " << in[i] << " at " << i;
  }
}

struct Kernels {
  const char* name;
  void (*to_bf16)(const float*, std::uint16_t*, std::size_t);
  void (*from_bf16)(const std::uint16_t*, float*, std::size_t);
  void (*to_fp16)(const float*, std::uint16_t*, std::size_t, float);
  void (*from_fp16)(const std::uint16_t*, float*, std::size_t, float);  // the scale (dispatched) or its inverse
};
const Kernels kBoth[] = {
    {"dispatched", toBf16, fromBf16, toFp16, fromFp16},
    {"portable", half_scalar::toBf16, half_scalar::fromBf16, half_scalar::toFp16, half_scalar::fromFp16},
};

TEST(Half, Bf16IsTorchsRoundingBitForBit) {
  for (const Kernels& k : kBoth) {
    SCOPED_TRACE(k.name);
    auto in = testValues();
    std::vector<std::uint16_t> ours(in.size());
    k.to_bf16(in.data(), ours.data(), in.size());
    expectSameBits<at::BFloat16>(in, ours, tensorOf(in).to(torch::kBFloat16));
    std::vector<float> back(in.size());
    k.from_bf16(ours.data(), back.data(), ours.size());
    const auto theirs = tensorOf(in).to(torch::kBFloat16).to(torch::kFloat32);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (!std::isnan(in[i])) ASSERT_EQ(back[i], theirs.data_ptr<float>()[i]) << i;
    }
  }
}

void fp16Matches(const Kernels& k) {
  auto in = testValues();
  std::vector<std::uint16_t> ours(in.size());
  k.to_fp16(in.data(), ours.data(), in.size(), 1.0f);
  expectSameBits<at::Half>(in, ours, tensorOf(in).to(torch::kHalf));
  std::vector<float> back(in.size());
  k.from_fp16(ours.data(), back.data(), ours.size(), 1.0f);
  const auto theirs = tensorOf(in).to(torch::kHalf).to(torch::kFloat32);
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!std::isnan(in[i])) ASSERT_EQ(std::signbit(back[i]), std::signbit(theirs.data_ptr<float>()[i])) << i;
    if (!std::isnan(in[i])) ASSERT_EQ(back[i], theirs.data_ptr<float>()[i]) << i;
  }
}

TEST(Half, Fp16IsTorchsRoundingBitForBit) {
  for (const Kernels& k : kBoth) {
    SCOPED_TRACE(k.name);
    fp16Matches(k);
  }
}

// The scale puts the largest magnitude in [2^14, 2^15): gradients far outside fp16's range
// arrive with fp16's relative precision (2^-11), none overflows, none vanishes.
TEST(Half, Fp16ScaleKeepsLargeAndSmallGradients) {
  for (float largest : {1e5f, 3e4f, 1.0f, 1e-3f, 1e-8f, 1e-30f}) {
    std::vector<float> in = {largest, -largest / 3, largest / 1000, 0.0f, largest / 7};
    const float scale = fp16Scale(in.data(), in.size());
    EXPECT_GE(largest * scale, 16384.0f) << largest;
    EXPECT_LT(largest * scale, 32768.0f) << largest;
    int e = 0;
    EXPECT_EQ(std::frexp(scale, &e), 0.5f) << "a power of two";
    std::vector<std::uint16_t> wire(in.size());
    std::vector<float> back(in.size());
    toFp16(in.data(), wire.data(), in.size(), scale);
    fromFp16(wire.data(), back.data(), in.size(), scale);
    for (std::size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(back[i], in[i], std::abs(in[i]) * 0x1p-11f) << largest;
    // Equal to torch's conversion of the scaled values.
    std::vector<float> scaled(in);
    for (float& x : scaled) x *= scale;
    expectSameBits<at::Half>(scaled, wire, tensorOf(scaled).to(torch::kHalf));
  }
  std::vector<float> zeros(9, 0.0f);
  EXPECT_EQ(fp16Scale(zeros.data(), zeros.size()), 1.0f);
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(fp16Scale(bad.data(), bad.size()), 1.0f);  // sent as it is: the step sees inf
  EXPECT_EQ(fp16Scale(nullptr, 0), 1.0f);
}

TEST(Half, WireFormatNames) {
  for (auto f : {WireFormat::kFp32, WireFormat::kBf16, WireFormat::kFp16}) {
    EXPECT_EQ(parseWireFormat(wireFormatName(f)), f);
  }
  EXPECT_EQ(wireBytesPerFloat(WireFormat::kFp32), 4u);
  EXPECT_EQ(wireBytesPerFloat(WireFormat::kBf16), 2u);
  EXPECT_THROW(parseWireFormat("int8"), OptionError);
  EXPECT_TRUE(std::string(halfKernels()) == "avx2+f16c" || std::string(halfKernels()) == "scalar");
}

}  // namespace
}  // namespace poseidon
