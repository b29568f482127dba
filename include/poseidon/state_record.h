// A named view of live memory that a checkpoint saves from and restores into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace poseidon {

// The floats of one parameter tensor that a record of optimizer state (momentum) belongs
// to: layer -1 for any other record. It lets state that the workers' own optimizer built
// be handed to the core's (AutogradSync::seedMomentum, when mode "auto" moves the SGD step
// onto the servers after the first iteration).
struct ParamSlice {
  int layer = -1;
  int tensor = 0;
  std::int64_t offset = 0;  // first float of the tensor
};

struct StateRecord {
  StateRecord() = default;
  StateRecord(std::string name, void* data, std::size_t bytes, ParamSlice momentum_of = {})
      : name(std::move(name)), data(data), bytes(bytes), momentum_of(momentum_of) {}

  std::string name;
  void* data = nullptr;
  std::size_t bytes = 0;
  ParamSlice momentum_of;
  // Momentum records only, for gathering the optimizer's state (Session::gatherMomentum):
  // every rank holds the same (SFB and replicated allreduce layers), and which of the
  // record's floats this rank keeps current (an allreduce slice stepped by its owner; -1:
  // all of them).
  bool replicated = false;
  std::int64_t current_begin = 0;
  std::int64_t current_count = -1;
};

// SGD momentum of the floats [of.offset, of.offset + values.size()) of one parameter tensor,
// as Session::gatherMomentum returns it.
struct MomentumValues {
  ParamSlice of;
  std::vector<float> values;
};

}  // namespace poseidon
