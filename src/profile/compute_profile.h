// Compute profiles: what a real run measured of its own compute, per layer, at one batch
// size. `poseidon train --profile-out` and the Python package's `write_profile` make them;
// emulated compute (`poseidon train --emulate-compute PROFILE`) waits their times, and the
// simulator (`poseidon simulate --profile`) builds its model from them. The text format,
// one line each, '#' starts a comment line (or ends a line):
//   batch K
//   layer NAME forward_ms F backward_ms B      (one per layer with parameters)
//   other forward_ms F backward_ms B           (the rest of an iteration's compute, in total)
//   cpu iteration_ms C                         (optional: the compute thread's CPU time in
//                                               one iteration, for the simulator's host CPU)
//   shape NAME kind fc|conv|other [M m N n rows r factorable 0|1] tensor TNAME DxDx... ...
//                                              (optional, one per layer: its shapes, so that
//                                               a profile describes a model of its own)
// Times are finite, 0 to kMaxProfileMs. Parsing needs nothing but the standard library,
// poseidon/errors.h and the model description, so it can be tested and fuzzed without
// LibTorch.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/model_info.h"

namespace poseidon {

// Longer than any layer takes (about 2.8 hours), and small enough that a wait of it fits
// std::chrono's nanoseconds.
constexpr double kMaxProfileMs = 1e7;

struct ComputeProfile {
  std::int64_t batch = 0;
  // Per layer with parameters, by name: milliseconds of forward and backward.
  std::map<std::string, std::pair<double, double>> layers;
  double other_forward_ms = 0;  // modules without parameters (ReLU, pooling) and the loop, in total
  double other_backward_ms = 0;
  // The compute thread's CPU time per iteration (0: not measured). Below the wall time
  // where the thread waited, or shared its core with other ranks or the network stack.
  double cpu_iteration_ms = 0;
  // The layers' shapes in forward order, when the profile has `shape` lines (else empty).
  std::vector<LayerInfo> shapes;
};

// Parses a profile's text; `source` names it in errors. InputError "<source> line N: ..."
// on anything malformed: unknown lines, missing or extra words, numbers that are not
// whole words, times that are negative, not finite or above kMaxProfileMs, shapes that
// are not positive, a shape line for a layer with no times.
ComputeProfile parseProfile(std::istream& in, const std::string& source);
// Reads the profile file at `path` and parses it.
ComputeProfile readProfile(const std::string& path);

// A profile's text from a run's timeline durations (Timeline::durationsMs: "forward L",
// "backward L", "wait L" and "iteration" spans, and "cpu iteration" samples, in ms): the
// medians per layer, the modules without parameters, the iteration's time outside all of
// them (the loss, the batch, the loop) and its CPU time, with a shape line per layer. `ranks` and `model` go in the
// header.
std::string profileText(const ModelInfo& model, const std::map<std::string, std::vector<double>>& spans,
                        std::int64_t batch, int ranks);

}  // namespace poseidon
