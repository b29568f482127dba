// OpenBLAS chooses its GEMM kernels from the CPU model when it is loaded. Debian's
// OpenBLAS 0.3.21 predates the newest Xeons (the build machine reports family 6, model
// 207) and falls back to its SSE3 "Prescott" kernels there, although the CPU has AVX-512:
// fcnet's FC layers and SFB's reconstruction then run 2-4x slower than the CPU allows
// (Uᵀ·V for fc9 at K·P = 128: 263 ms with Prescott kernels, 67 ms with SkylakeX ones).
#pragma once

#include <string>

namespace poseidon::app {

// Called first in main(). When OpenBLAS fell back to its generic kernels on a CPU with
// AVX-512 or AVX2 and the user has not set OPENBLAS_CORETYPE, re-executes this program
// with OPENBLAS_CORETYPE naming the matching kernels (the library reads it only at load
// time, before main). Does nothing with another BLAS; if the re-exec fails, runs on.
void selectBlasKernels(char** argv);

// The kernels OpenBLAS uses (e.g. "SkylakeX"), or "" when the BLAS is not OpenBLAS.
std::string blasKernels();

}  // namespace poseidon::app
