# The BLAS behind common/gemm.h, chosen by POSEIDON_BLAS:
#   system: the system's CBLAS (Debian's OpenBLAS through its alternatives; cblas.h needed);
#   torch:  the Fortran sgemm_ that LibTorch's bundled BLAS exports, resolved where the core
#           is linked with LibTorch (the Python extension, the CLI): a build with no system
#           BLAS, such as `pip install .` on a machine with only a compiler;
#   auto:   system where found, else torch.
# Sets POSEIDON_BLAS_SOURCE (the gemm implementation) and POSEIDON_BLAS_LIBS (what links it).
set(POSEIDON_BLAS "auto" CACHE STRING "BLAS for SFB's GEMM: system, torch or auto")
set_property(CACHE POSEIDON_BLAS PROPERTY STRINGS auto system torch)
if(NOT POSEIDON_BLAS STREQUAL "torch")
  find_package(BLAS)
  include(CheckIncludeFileCXX)
  check_include_file_cxx(cblas.h POSEIDON_HAVE_CBLAS_H)
endif()
if(NOT POSEIDON_BLAS STREQUAL "torch" AND BLAS_FOUND AND POSEIDON_HAVE_CBLAS_H)
  set(POSEIDON_BLAS_SOURCE common/gemm_cblas.cc)
  set(POSEIDON_BLAS_LIBS BLAS::BLAS)
  message(STATUS "Poseidon: GEMM from the system's CBLAS")
elseif(POSEIDON_BLAS STREQUAL "system")
  message(FATAL_ERROR "POSEIDON_BLAS=system: no CBLAS found (install libopenblas-dev, or use POSEIDON_BLAS=torch)")
elseif(NOT POSEIDON_BUILD_TORCH)
  message(FATAL_ERROR "no system CBLAS, and without LibTorch (POSEIDON_BUILD_TORCH=OFF) none to borrow: "
                      "install libopenblas-dev")
else()
  set(POSEIDON_BLAS_SOURCE common/gemm_fortran.cc)
  set(POSEIDON_BLAS_LIBS "")
  message(STATUS "Poseidon: GEMM from LibTorch's bundled BLAS (sgemm_)")
endif()
