// FNV-1a 64-bit digest: cheap, deterministic across ranks and runs, used to check that
// ranks agree (configuration, information book, final parameters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace poseidon {

class Digest {
 public:
  void update(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
      state_ ^= p[i];
      state_ *= 1099511628211ULL;
    }
  }
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::uint64_t value() const { return state_; }
  std::string hex() const;

 private:
  std::uint64_t state_ = 14695981039346656037ULL;
};

}  // namespace poseidon
