#include "threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace poseidon::app {

int localRanks() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return v ? std::max(1, std::atoi(v)) : 1;
}

int worldRank() {
  const char* v = std::getenv("OMPI_COMM_WORLD_RANK");
  return v ? std::atoi(v) : 0;
}

int setComputeThreads(int requested) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = requested > 0 ? requested : std::max(1, cores / localRanks());
  torch::set_num_threads(threads);
  // LibTorch reaches BLAS through Debian's alternatives; OpenBLAS keeps its own pool.
  // Looked up at run time so the build does not depend on which BLAS is installed.
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
  return threads;
}

}  // namespace poseidon::app
