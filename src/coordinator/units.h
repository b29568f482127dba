// Bandwidths as people write them: "1gbit", "100mbit" (tc's units, bits per second),
// "125MB" (bytes per second), or a plain number of bytes per second.
#pragma once

#include <string>

namespace poseidon {

// Bytes per second; throws InputError naming `flag` on anything else.
double parseBandwidth(const std::string& text, const std::string& flag);

}  // namespace poseidon
