// A named view of live memory that a checkpoint saves from and restores into.
#pragma once

#include <cstddef>
#include <string>

namespace poseidon {

struct StateRecord {
  std::string name;
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace poseidon
