// Compute profiles for emulated compute (`poseidon train --emulate-compute PROFILE`): per
// layer, the milliseconds its forward and backward take at one batch size. The text format,
// one line each, '#' starts a comment line (or ends a line):
//   batch K
//   layer NAME forward_ms F backward_ms B      (one per layer with parameters)
//   other forward_ms F backward_ms B           (modules without parameters, in total)
// Times are finite, 0 to kMaxProfileMs. Parsing needs nothing but the standard library
// and poseidon/errors.h, so that it can be tested and fuzzed without LibTorch.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <utility>

namespace poseidon::app {

// Longer than any layer takes (about 2.8 hours), and small enough that a wait of it fits
// std::chrono's nanoseconds.
constexpr double kMaxProfileMs = 1e7;

struct ComputeProfile {
  std::int64_t batch = 0;
  // Per layer with parameters, by name: milliseconds of forward and backward.
  std::map<std::string, std::pair<double, double>> layers;
  double other_forward_ms = 0;  // modules without parameters (ReLU, pooling), in total
  double other_backward_ms = 0;
};

// Parses a profile's text; `source` names it in errors. InputError "<source> line N: ..."
// on anything malformed: unknown lines, missing or extra words, numbers that are not
// whole words, times that are negative, not finite or above kMaxProfileMs.
ComputeProfile parseProfile(std::istream& in, const std::string& source);
// Reads the profile file at `path` and parses it.
ComputeProfile readProfile(const std::string& path);

}  // namespace poseidon::app
