#include "allreduce/fusion.h"

namespace poseidon {

std::vector<FusedBucket> fuseLayers(const std::vector<std::pair<int, std::int64_t>>& layers, std::int64_t max_bytes) {
  const std::int64_t max_floats = max_bytes / static_cast<std::int64_t>(sizeof(float));
  std::vector<FusedBucket> buckets;
  for (const auto& [id, floats] : layers) {
    if (buckets.empty() || buckets.back().floats + floats > max_floats) buckets.emplace_back();
    FusedBucket& b = buckets.back();
    b.layers.push_back(id);
    b.offsets.push_back(b.floats);
    b.floats += floats;
  }
  return buckets;
}

}  // namespace poseidon
