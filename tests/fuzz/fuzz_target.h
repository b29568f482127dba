// What every fuzz target here asserts: bytes from outside either parse or are refused with
// Poseidon's Error. Anything else escaping (std::invalid_argument, std::out_of_range, ...)
// reaches std::terminate, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "poseidon/errors.h"

namespace poseidon::fuzz {

template <typename Parse>
int parseOrRefuse(Parse parse) {
  try {
    parse();
  } catch (const Error&) {
    // Refused with a clear error: what must happen to bad bytes.
  }
  return 0;
}

inline std::string text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace poseidon::fuzz
