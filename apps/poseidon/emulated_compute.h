// Emulated compute (`--emulate-compute PROFILE`): every layer's forward and backward is a
// wait of the duration a profile gives, while all communication stays real, so that 8 or
// 16 ranks fit on a 2-core machine and show how communication alone scales. A profile is
// measured by a real run with `--profile-out FILE` (one rank: the compute alone), or
// written by hand from a GPU profile. Output and JSON say plainly that compute is emulated.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "poseidon/options.h"
#include "profile/compute_profile.h"
#include "train_options.h"

namespace poseidon {
class Runtime;
class Session;
struct ModelSpec;
}  // namespace poseidon

namespace poseidon::app {

// Writes rank 0's medians of the session's timeline as a profile (atomically; the format:
// profile/compute_profile.h).
void writeProfile(Session& session, const std::string& path, std::int64_t batch);

// Trains `spec` with emulated compute; returns the exit code.
int runEmulated(const TrainOptions& o, Runtime& runtime, const ModelSpec& spec, Options session_options,
                std::int64_t total);

}  // namespace poseidon::app
