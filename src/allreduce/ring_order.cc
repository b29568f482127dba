#include "allreduce/ring_order.h"

#include <algorithm>
#include <cstring>

#include "allreduce/sum16.h"

namespace poseidon {

int sliceOf(std::size_t i, std::size_t count, int P) {
  const sum16::Slices slices(count, P);
  int s = static_cast<int>(std::min<std::size_t>(i * static_cast<std::size_t>(P) / std::max<std::size_t>(count, 1),
                                                 static_cast<std::size_t>(P - 1)));
  while (s + 1 < P && slices.begin(s + 1) <= i) ++s;
  while (s > 0 && slices.begin(s) > i) --s;
  return s;
}

void addInRingOrder(const std::vector<const float*>& from, int slice, std::size_t n, float* out) {
  const int P = static_cast<int>(from.size());
  constexpr std::size_t kBlock = 1024;  // the running sums stay in L1 while the P values are added
  float acc[kBlock];
  for (std::size_t start = 0; start < n; start += kBlock) {
    const std::size_t len = std::min(kBlock, n - start);
    const float* first = from[ringFirst(slice, P)] + start;
    std::copy(first, first + len, acc);
    for (int j = 1; j < P; ++j) {
      const float* next = from[(ringFirst(slice, P) + j) % P] + start;
      for (std::size_t i = 0; i < len; ++i) acc[i] = acc[i] + next[i];
    }
    std::memcpy(out + start, acc, len * sizeof(float));
  }
}

void addSliceInRingOrder(const std::vector<std::vector<float>>& all, std::size_t count, int slice, float* out) {
  const sum16::Slices slices(count, static_cast<int>(all.size()));
  std::vector<const float*> from;
  for (const auto& values : all) from.push_back(values.data() + slices.begin(slice));
  addInRingOrder(from, slice, slices.length(slice), out);
}

}  // namespace poseidon
