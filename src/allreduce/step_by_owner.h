// The step by owner (issue 38): an allreduce whose result is not the sums but the step
// taken from them. Each rank steps the slice of the buffer it owns and sends the updated
// values to the others (Communicator::allreduceStepped), so each rank steps a P-th of the
// parameters instead of all of them, and the replicas stay equal bit for bit.
//
// On a 16-bit wire (Communicator::allreduceStepped16) the owner sends its slice's update
// (new values minus old) in 16 bits instead of the values, as a parameter-server shard
// sends its kParams16 update, and every rank (the owner too) holds old + the update as it
// reads it: a 16-bit allreduce's bytes, a P-th of the steps, and replicas still equal bit
// for bit. With bf16 (no scale) this is the sharded PS's arithmetic value for value.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "allreduce/sum16.h"

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

// The owner's part of an allreduce whose result is a step (allreduceStepped): from every
// rank's contribution to values [begin, begin + n) of the buffer, update the same range of
// the targets. `from` is one view, their sum already (fp32: the ring's, ring_order.h), or on
// a 16-bit wire every rank's rounded contribution in rank order, which the step adds in fp32
// in that order as it reads them (sgdStepViews), so no sum is written and read back.
using OwnerStep = std::function<void(std::size_t begin, std::size_t n, const std::vector<GradientView>& from)>;

namespace owner16 {

// The owner's buffers for stepOwnSlice, kept by its communicator across calls.
struct Scratch {
  std::vector<float> before, update;
};

// The owner's part on a 16-bit wire: steps values [begin, begin + n) of `targets` from
// the ranks' encoded slices `from` (OwnerStep: their sum in fp32, rank order), writes the update (new minus old, with
// `carried`'s residual added and keeping what the rounding lost) encoded as a sum16 slice into `out` (Slices::words(n):
// scale first), and leaves old + the update as every rank reads it in the targets.
void stepOwnSlice(WireFormat format, const PiecedBuffer& targets, std::size_t begin, std::size_t n,
                  const std::vector<const std::uint16_t*>& from, const OwnerStep& step, std::uint16_t* out,
                  sum16::Carried carried, Scratch& scratch);
// Another owner's encoded update (a sum16 slice of n values) added onto values
// [begin, begin + n) of `targets`: the same additions as the owner's own. CommError for
// a scale no sender writes.
void addUpdate(WireFormat format, const std::uint16_t* in, const PiecedBuffer& targets, std::size_t begin,
               std::size_t n);

}  // namespace owner16

}  // namespace poseidon
