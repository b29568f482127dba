// A compute profile (`poseidon train --emulate-compute PROFILE`, `poseidon simulate
// --profile`): `batch K`, `layer NAME forward_ms F backward_ms B`, `other forward_ms F
// backward_ms B`, `cpu iteration_ms C`, `shape NAME kind ...`, '#' comments. parseProfile
// (src/profile/compute_profile.cc) needs neither LibTorch nor the library, so run_fuzz.sh
// compiles that file as it is, and each input is parsed in memory.
#include <sstream>
#include <string>

#include "fuzz_target.h"
#include "profile/compute_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return poseidon::fuzz::parseOrRefuse([&] {
    std::istringstream in(poseidon::fuzz::text(data, size));
    const poseidon::ComputeProfile p = poseidon::parseProfile(in, "fuzz");
    (void)p.layers.size();
    for (const auto& l : p.shapes) (void)l.numel();
  });
}
