#include "coordinator/units.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

double parseBandwidth(const std::string& text, const std::string& field) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit(end);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double scale = -1;
  if (unit.empty() || unit == "b" || unit == "b/s")
    scale = 1;
  else if (unit == "kb" || unit == "kb/s")
    scale = 1e3;
  else if (unit == "mb" || unit == "mb/s")
    scale = 1e6;
  else if (unit == "gb" || unit == "gb/s")
    scale = 1e9;
  else if (unit == "bit")
    scale = 1.0 / 8;
  else if (unit == "kbit")
    scale = 1e3 / 8;
  else if (unit == "mbit")
    scale = 1e6 / 8;
  else if (unit == "gbit")
    scale = 1e9 / 8;
  if (end == text.c_str() || scale < 0 || !(v > 0)) {
    throw OptionError("{" + field + "=" + text + "}: give a rate such as 1gbit, 100mbit or 125MB (bytes per second)");
  }
  return v * scale;
}

double parseRateOrOff(const std::string& text, const std::string& field) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && v == 0) return 0;  // "0", "0.0"
  try {
    return parseBandwidth(text, field);
  } catch (const OptionError&) {
    throw OptionError("{" + field + "=" + text + "}: give a rate such as 1gbit, 100mbit or 125MB (bytes per second), or 0 for none");
  }
}

}  // namespace poseidon
