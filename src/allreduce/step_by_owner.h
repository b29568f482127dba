// The step by owner (issue 38): an allreduce whose result is not the sums but the step
// taken from them. Each rank steps the slice of the buffer it owns and sends the updated
// values to the others (Communicator::allreduceStepped), so each rank steps a P-th of the
// parameters instead of all of them, and the replicas stay equal bit for bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace poseidon {

// A buffer of `count` floats laid out in pieces of memory, in order: a fusion bucket's
// parameters, each tensor where the model keeps it.
struct PiecedBuffer {
  std::vector<float*> pieces;
  std::vector<std::size_t> sizes;  // floats of each piece
  std::size_t count() const;
  // Values [from, from + len) into out[0, len), or from in[0, len) into the pieces.
  void copyTo(std::size_t from, std::size_t len, float* out) const;
  void copyFrom(std::size_t from, std::size_t len, const float* in) const;
  // f(at, n, offset): values [offset, offset + n) of the range [from, from + len) lie at
  // `at` (a piece's memory), in order.
  template <typename F>
  void forEach(std::size_t from, std::size_t len, F f) const {
    std::size_t begin = 0;
    for (std::size_t p = 0; p < pieces.size() && len > 0; begin += sizes[p], ++p) {
      const std::size_t end = begin + sizes[p];
      if (end <= from) continue;
      const std::size_t n = std::min(end, from + len) - from;
      f(pieces[p] + (from - begin), n, from);
      from += n;
      len -= n;
    }
  }
};

// The owner's part of an allreduce whose result is a step (allreduceStepped): with the
// rank-order sums of values [begin, begin + n) of the buffer, update the same range of
// the targets.
using OwnerStep = std::function<void(std::size_t begin, std::size_t n, const float* sums)>;

}  // namespace poseidon
