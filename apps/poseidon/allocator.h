// glibc's malloc settings for a training process. By default glibc moves its mmap threshold
// with the sizes freed so far and hands freed heap memory back to the kernel above a trim
// threshold that follows it; a training loop allocates and frees the same activation and
// gradient sizes every iteration, and depending on the order of the first frees a run
// settles either with its tensors in the heap or re-faulting them from the kernel each
// iteration. Measured on convnet, one rank, 40 iterations: 290-610 thousand page faults and
// 0.126-0.156 s/iter with the defaults (bimodal from run to run), 48-63 thousand and
// 0.118-0.139 s/iter with the settings below. The plain --baseline loop gets them too, and
// bench/papers/systems_vs_ddp.py gives PyTorch DDP the same through glibc's environment variables.
#pragma once

namespace poseidon::app {

constexpr int kMallocMmapThreshold = 32 << 20;   // glibc's largest: bigger blocks are mmapped
constexpr int kMallocTrimThreshold = 512 << 20;  // freed heap memory kept for reuse

// Called first in main(); a user's MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ win.
void tuneAllocator();

}  // namespace poseidon::app
