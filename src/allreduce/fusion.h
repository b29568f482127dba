// Tensor fusion: consecutive small layers share one buffer and one collective, so a net of
// many small layers does not pay one latency per tensor (Horovod's fusion buffer, with
// the groups fixed at start-up so every rank forms the same ones).
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

struct FusedBucket {
  std::vector<int> layers;            // in the order given
  std::vector<std::int64_t> offsets;  // where each layer's floats start in the buffer
  std::int64_t floats = 0;
};

// Groups `layers` (id, floats), taken in the order their gradients are expected, into
// buckets of at most `max_bytes`; a layer larger than that is a bucket of its own, and
// max_bytes = 0 puts every layer alone.
std::vector<FusedBucket> fuseLayers(const std::vector<std::pair<int, std::int64_t>>& layers, std::int64_t max_bytes);

}  // namespace poseidon
