// An allreduce of 16-bit gradients (issue 38): half a ring's bytes, and every rank reads the
// same bits. The buffer is cut into P slices, slice s owned by rank s. Each rank rounds its
// contribution to the wire's format a slice at a time and sends each slice to its owner
// (an alltoall); the owner widens the P contributions and adds them in fp32 in rank order,
// rounds the sum once more and sends it to every rank (an allgather). So each slice of the
// result is
//     widen(round( sum over r = 0..P-1, in that order, of widen(round(send_r)) ))
// on every rank and on every run: deterministic, not exact (two roundings), as a 16-bit
// wire is. A slice on the wire is its fp16 scale (an f32 in two u16 words, 1 for bf16; the
// scale of that slice alone, so one large gradient does not flush another's small ones)
// then its values. Moves 2 (P-1)/P of the buffer in 16 bits per rank, as a ring in fp32
// moves it in 32.
//
// With error feedback (Feedback), both roundings keep what they lost and add it to the next
// call's values on the same buffer: each rank its contribution's, each owner its slice's
// sum's. The bits stay the same on every rank: only the owner's sum reaches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/error_feedback.h"
#include "common/half.h"

namespace poseidon::sum16 {

// The P slices of `count` floats: as even as integers allow, in rank order.
class Slices {
 public:
  Slices(std::size_t count, int P) : count_(count), P_(P) {}
  int parts() const { return P_; }
  std::size_t begin(int s) const { return count_ * static_cast<std::size_t>(s) / static_cast<std::size_t>(P_); }
  std::size_t length(int s) const { return begin(s + 1) - begin(s); }
  // u16 words of slice s on the wire (scale + values), and where it starts in a whole
  // buffer's encoding (slices in order).
  std::size_t words(int s) const { return kScaleWords + length(s); }
  std::size_t offset(int s) const { return begin(s) + kScaleWords * static_cast<std::size_t>(s); }
  std::size_t totalWords() const { return count_ + kScaleWords * static_cast<std::size_t>(P_); }

  static constexpr std::size_t kScaleWords = 2;

 private:
  std::size_t count_;
  int P_;
};

// One bucket's residuals, each as long as the buffer: `sent` this rank's contribution's,
// `sum` the owners' roundings by slice: of the sums, or in the step by owner of the updates
// (step_by_owner.h). Over MPI rank s keeps slice s of `sum` alone (the rest stays 0), and
// so does the generic step by owner; the generic sum reduces every slice on every rank, so
// each keeps all of them, the same values everywhere.
struct Feedback {
  explicit Feedback(std::size_t count) : sent(count), sum(count) {}
  Residual sent, sum;
};

// A residual's part in one rounding: values [at, at + n) of it.
struct Carried {
  Residual* residual = nullptr;  // none: no error feedback
  std::size_t at = 0;
};

// out[0, words) = slice's n floats, rounded (its scale first). With a residual, its part is
// added first and then keeps what the rounding lost.
void encodeSlice(WireFormat format, const float* values, std::size_t n, std::uint16_t* out, Carried carried = {});
// All P slices of `values`, one after another (Slices::offset); `sent` (or null) as above,
// the whole buffer.
void encode(WireFormat format, const float* values, const Slices& slices, std::uint16_t* out,
            Residual* sent = nullptr);
// out[0, n) = the encoded slice's floats. CommError for a scale no sender writes.
void decodeSlice(WireFormat format, const std::uint16_t* in, std::size_t n, float* out);
// The encoded slice's values where they lie, its scale checked as decodeSlice's.
HalfSpan spanOfSlice(WireFormat format, const std::uint16_t* in);
// The owner's step: `from[r]` is rank r's encoded slice (n values); `out` gets the encoded
// sum, added in fp32 in rank order, starting from rank 0's values (and the sum's residual
// added before it is rounded, with `carried`).
void reduceSlice(WireFormat format, const std::vector<const std::uint16_t*>& from, std::size_t n,
                 std::uint16_t* out, Carried carried = {});

}  // namespace poseidon::sum16
