// gemmTransposedA on the system's CBLAS (common/gemm.h).
#include <cblas.h>

#include "common/gemm.h"

namespace poseidon {

void gemmTransposedA(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float* c,
                     int ldc) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
}

}  // namespace poseidon
