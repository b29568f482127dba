// The one matrix product the core needs (SFB's reconstruction, the start-up GEMM probe), over
// whichever BLAS the build found: the system's CBLAS (gemm_cblas.cc), or the Fortran sgemm_
// that LibTorch's own BLAS exports (gemm_fortran.cc; a build with no system BLAS, such as
// `pip install .` into an environment that holds torch).
#pragma once

namespace poseidon {

// C (m x n, row-major, leading dimension ldc) = alpha * A^T * B, where A is k x m and B is
// k x n, both row-major with leading dimensions lda and ldb.
void gemmTransposedA(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float* c,
                     int ldc);

}  // namespace poseidon
