// Enum <-> name tables: each enum that options, reports or files spell as a word has one
// table of {value, name} pairs, and every lookup goes through these helpers, so a name is
// written once. The parsers keep their own errors (each names its option and choices).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>

namespace poseidon {

template <typename E, std::size_t N>
using NameTable = std::array<std::pair<E, const char*>, N>;

// The name of `value` in `table` ("?" for a value the table lacks).
template <typename E, std::size_t N>
constexpr const char* nameIn(const NameTable<E, N>& table, E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}

// The value named `name`, or nullptr.
template <typename E, std::size_t N>
const E* valueIn(const NameTable<E, N>& table, std::string_view name) {
  for (const auto& entry : table) {
    if (name == entry.second) return &entry.first;
  }
  return nullptr;
}

// "a, b or c": the table's names in its order, for an error's list of choices.
template <typename E, std::size_t N>
std::string namesIn(const NameTable<E, N>& table) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    out += (i == 0 ? "" : i + 1 == N ? " or " : ", ");
    out += table[i].second;
  }
  return out;
}

}  // namespace poseidon
