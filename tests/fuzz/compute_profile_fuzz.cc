// A compute profile (`poseidon train --emulate-compute PROFILE`): `batch K`,
// `layer NAME forward_ms F backward_ms B`, `other forward_ms F backward_ms B`, '#' comments.
// parseProfile (apps/poseidon/compute_profile.cc) needs neither LibTorch nor the library, so
// run_fuzz.sh compiles that file as it is, and each input is parsed in memory.
#include <sstream>
#include <string>

#include "compute_profile.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return poseidon::fuzz::parseOrRefuse([&] {
    std::istringstream in(poseidon::fuzz::text(data, size));
    const poseidon::app::ComputeProfile p = poseidon::app::parseProfile(in, "fuzz");
    (void)p.layers.size();
  });
}
