// The order the fp32 sums add every rank's values in: the ring's (MpiCommunicator's
// reduce-scatter, which the loopback communicator reproduces). Slice s of a buffer
// (sum16::Slices: values [count s / P, count (s+1) / P)) starts from rank s+1's values and
// adds each next rank's around the ring, rank s's last:
//     ((x[s+1] + x[s+2]) + ...) + x[s]          (ranks mod P)
// The same bits on every rank and every run; at 2 ranks the rank-order sum itself (a + b
// is b + a in IEEE arithmetic). The 16-bit path and the parameter server add in rank order.
#pragma once

#include <cstddef>
#include <vector>

namespace poseidon {

// The rank whose value a slice's ring sum starts from.
inline int ringFirst(int slice, int P) { return (slice + 1) % P; }

// The slice (sum16::Slices(count, P)) that value i of a `count`-value buffer lies in.
int sliceOf(std::size_t i, std::size_t count, int P);

// out[0, n) = the ring-order sum of slice `slice` from every rank's values of it (`from`,
// by rank). `out` may be one of them.
void addInRingOrder(const std::vector<const float*>& from, int slice, std::size_t n, float* out);

// out[0, length of slice s) = the ring-order sum of slice s of every rank's whole buffer
// (`all`, by rank; sum16::Slices(count, P) cuts them).
void addSliceInRingOrder(const std::vector<std::vector<float>>& all, std::size_t count, int slice, float* out);

}  // namespace poseidon
