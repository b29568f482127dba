// Bandwidths as people write them: "1gbit", "100mbit" (tc's units, bits per second),
// "125MB" (bytes per second), or a plain number of bytes per second.
#pragma once

#include <string>

namespace poseidon {

// Bytes per second; throws OptionError ({field=text}, field being the Options member or
// the option's name, so each front end says it as its flag or keyword) on anything else.
double parseBandwidth(const std::string& text, const std::string& field);
// The same for a rate an option may leave off: "0" gives 0 (stack_rate, reduce_rate,
// max_bandwidth).
double parseRateOrOff(const std::string& text, const std::string& field);

}  // namespace poseidon
