// Reading the words of the project's small text formats (model files, compute profiles):
// whitespace-separated words, and numbers that must be the whole word. std::stod and
// std::stoll alone take "0.5xyz" as 0.5 and "inf" or "nan" as numbers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace poseidon {

// The words of a line, split at whitespace as `>>` splits them (without a stream per line:
// the fuzzers parse many lines a second).
std::vector<std::string> splitWords(const std::string& line);
// The whole word as a finite double, or NaN (which every range check refuses) when it is
// not one.
double parseWholeReal(const std::string& word);
// The whole word as an integer, or nothing when it is not one (or does not fit).
std::optional<long long> parseWholeInteger(const std::string& word);

}  // namespace poseidon
