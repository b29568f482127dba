// The two kernels whose implementation depends on what the build found: the checkpoints' CRC
// (zlib's, or the core's own where there is no zlib: the same values) and SFB's GEMM (the
// system's CBLAS, or LibTorch's sgemm_ in builds without one).
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <vector>

#include "common/crc32.h"
#include "common/gemm.h"

namespace poseidon {
namespace {

TEST(Crc32, PortableEqualsZlibAtEveryLengthAndSplit) {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(4099);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  for (std::size_t n : {0, 1, 7, 8, 9, 63, 64, 1000, 4099}) {
    const auto zlib = static_cast<std::uint32_t>(::crc32_z(0, bytes.data(), n));
    EXPECT_EQ(crc32Portable(0, bytes.data(), n), zlib) << n;
    EXPECT_EQ(crc32Update(0, bytes.data(), n), zlib) << n;
    const std::size_t half = n / 3;  // in two pieces, as a file written in parts
    EXPECT_EQ(crc32Portable(crc32Portable(0, bytes.data(), half), bytes.data() + half, n - half), zlib) << n;
  }
  EXPECT_EQ(crc32Portable(0, "123456789", 9), 0xCBF43926u);  // the CRC-32 check value
}

// Leading dimensions wider than the product (SFB's reconstruction takes rows r0.. of U, whose
// leading dimension is the layer's M), as well as tight ones.
class Gemm : public ::testing::TestWithParam<int> {};

TEST_P(Gemm, TransposedAEqualsTheDefinition) {
  const int m = 5, n = 7, k = 3, pad = GetParam(), lda = m + pad, ldb = n + pad, ldc = n + pad;
  std::vector<float> a(k * lda), b(k * ldb), c(m * ldc);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * static_cast<float>(i % 11) - 1.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.5f * static_cast<float>(i % 5) - 0.75f;
  gemmTransposedA(m, n, k, 2.0f, a.data(), lda, b.data(), ldb, c.data(), ldc);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float want = 0;
      for (int p = 0; p < k; ++p) want += a[p * lda + i] * b[p * ldb + j];
      EXPECT_FLOAT_EQ(c[i * ldc + j], 2.0f * want) << i << "," << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LeadingDimensions, Gemm, ::testing::Values(0, 3));

}  // namespace
}  // namespace poseidon
