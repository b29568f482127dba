#include "allocator.h"

#include <malloc.h>

#include <cstdlib>

namespace poseidon::app {

void tuneAllocator() {
  // Setting either value turns glibc's dynamic adjustment off, so both are set together.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, kMallocMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kMallocTrimThreshold);
}

}  // namespace poseidon::app
