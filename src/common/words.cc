#include "common/words.h"

#include <cmath>
#include <limits>

namespace poseidon {

std::vector<std::string> splitWords(const std::string& line) {
  static const char* const kSpace = " \t\n\v\f\r";
  std::vector<std::string> words;
  for (std::size_t at = line.find_first_not_of(kSpace); at != std::string::npos;) {
    const std::size_t end = line.find_first_of(kSpace, at);
    words.push_back(line.substr(at, end - at));
    at = end == std::string::npos ? end : line.find_first_not_of(kSpace, end);
  }
  return words;
}

double parseWholeReal(const std::string& word) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(word, &used);
  } catch (...) {
    used = 0;
  }
  return used == word.size() && std::isfinite(v) ? v : std::numeric_limits<double>::quiet_NaN();
}

std::optional<long long> parseWholeInteger(const std::string& word) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(word, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != word.size()) return std::nullopt;
  return v;
}

}  // namespace poseidon
