// A rank's checkpoint state file, restored into records of fixed sizes.
#include <vector>

#include "checkpoint/state_file.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return poseidon::fuzz::parseOrRefuse([&] {
    std::vector<float> a(4), b(64);
    std::uint8_t c[3];
    poseidon::parseStateFile(poseidon::fuzz::text(data, size), "fuzz",
                             {{"a", a.data(), 16}, {"params/b", b.data(), 256}, {"c", c, 3}});
  });
}
