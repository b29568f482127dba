#include "common/digest.h"

#include <cstdio>

namespace poseidon {

std::string Digest::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(state_));
  return buf;
}

}  // namespace poseidon
