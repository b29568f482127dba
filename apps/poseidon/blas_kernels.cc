#include "blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace poseidon::app {

namespace {

// Set on the re-executed process, so it never loops.
constexpr const char* kReexecMark = "POSEIDON_BLAS_REEXEC";

// The kernels this CPU can run, in OpenBLAS's names; nullptr if none better than SSE3.
const char* bestKernelsForCpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

}  // namespace

std::string blasKernels() {
  // Looked up at run time: LibTorch reaches OpenBLAS through the system's BLAS alternative.
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (fn == nullptr) return "";
  const char* name = fn();
  return name ? name : "";
}

void selectBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv(kReexecMark) != nullptr) return;
  // OpenBLAS's fallback for Intel models it does not know.
  if (blasKernels() != "Prescott") return;
  const char* kernels = bestKernelsForCpu();
  if (kernels == nullptr) return;
  setenv("OPENBLAS_CORETYPE", kernels, 1);
  setenv(kReexecMark, "1", 1);
  execv("/proc/self/exe", argv);
  // Still here: the re-exec failed; run on with the slow kernels rather than not at all.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kReexecMark);
}

}  // namespace poseidon::app
