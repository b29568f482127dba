// gemmTransposedA on the Fortran BLAS interface (common/gemm.h): the sgemm_ that LibTorch's
// bundled BLAS exports, for builds without a system BLAS. The symbol is resolved where the
// core is linked with LibTorch (the Python extension, the CLI).
#include "common/gemm.h"

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

namespace poseidon {

// Column-major, the row-major C = A^T B is C^T = B^T A: B's storage read as the n x k matrix
// B^T, A's as the m x k matrix A^T, transposed again.
void gemmTransposedA(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float* c,
                     int ldc) {
  const float beta = 0.0f;
  sgemm_("N", "T", &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
}

}  // namespace poseidon
