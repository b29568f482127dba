#include "allreduce/sum16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "allreduce/communicator.h"
#include "poseidon/errors.h"

namespace poseidon::sum16 {

namespace {

constexpr std::size_t kChunk = 4096;  // floats widened at a time through a stack buffer

float scaleOf(WireFormat format, const std::uint16_t* in) {
  float scale;
  std::memcpy(&scale, in, sizeof(float));
  if (format == WireFormat::kBf16 ? scale != 1.0f : !(scale > 0 && scale < 1e38f)) {
    throw CommError(detail::cat("a 16-bit allreduce slice arrived with scale ", scale, ", which no rank writes for ",
                                wireFormatName(format)));
  }
  return scale;
}

HalfSpan spanOf(WireFormat format, const std::uint16_t* in) {
  return HalfSpan{format, scaleOf(format, in), in + Slices::kScaleWords};
}

}  // namespace

void encodeSlice(WireFormat format, const float* values, std::size_t n, std::uint16_t* out, Carried carried) {
  POSEIDON_ENFORCE(format != WireFormat::kFp32, "a 16-bit allreduce needs a 16-bit format");
  if (carried.residual != nullptr) values = carried.residual->carry(carried.at, values, n);
  const float scale = format == WireFormat::kFp16 ? fp16Scale(values, n) : 1.0f;
  std::memcpy(out, &scale, sizeof(float));
  if (format == WireFormat::kBf16) {
    toBf16(values, out + Slices::kScaleWords, n);
  } else {
    toFp16(values, out + Slices::kScaleWords, n, scale);
  }
  if (carried.residual == nullptr) return;
  // What a receiver will read, a chunk at a time: the rest of the carried values is the
  // next residual.
  const HalfSpan span = spanOf(format, out);
  float block[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t c = std::min(kChunk, n - i);
    widen(span, i, block, c);
    carried.residual->keep(carried.at + i, block, c);
  }
}

void encode(WireFormat format, const float* values, const Slices& slices, std::uint16_t* out, Residual* sent) {
  for (int s = 0; s < slices.parts(); ++s) {
    encodeSlice(format, values + slices.begin(s), slices.length(s), out + slices.offset(s),
                Carried{sent, slices.begin(s)});
  }
}

void decodeSlice(WireFormat format, const std::uint16_t* in, std::size_t n, float* out) {
  widen(spanOf(format, in), 0, out, n);
}

namespace {

// bf16 has no slice scale, so the owner rounds its sum a chunk at a time as it makes it:
// one pass over the ranks' chunks, no slice-long fp32 sum written and read back. The same
// arithmetic as the whole-slice way, value for value (rank order, one rounding each).
void reduceSliceBf16(const std::vector<const std::uint16_t*>& from, std::size_t n, std::uint16_t* out,
                     Carried carried) {
  std::vector<HalfSpan> spans;
  for (const std::uint16_t* in : from) spans.push_back(spanOf(WireFormat::kBf16, in));
  const float one = 1.0f;
  std::memcpy(out, &one, sizeof(float));
  const HalfSpan written{WireFormat::kBf16, 1.0f, out + Slices::kScaleWords};
  float sum[kChunk], block[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t c = std::min(kChunk, n - i);
    widen(spans[0], i, sum, c);
    for (std::size_t r = 1; r < spans.size(); ++r) {
      widen(spans[r], i, block, c);
      for (std::size_t j = 0; j < c; ++j) sum[j] += block[j];
    }
    const float* values = carried.residual != nullptr ? carried.residual->carry(carried.at + i, sum, c) : sum;
    toBf16(values, out + Slices::kScaleWords + i, c);
    if (carried.residual == nullptr) continue;
    widen(written, i, block, c);
    carried.residual->keep(carried.at + i, block, c);
  }
}

}  // namespace

void reduceSlice(WireFormat format, const std::vector<const std::uint16_t*>& from, std::size_t n,
                 std::uint16_t* out, Carried carried) {
  POSEIDON_ENFORCE(!from.empty(), "a 16-bit sum needs a rank's values");
  if (format == WireFormat::kBf16) return reduceSliceBf16(from, n, out, carried);
  // fp16: the sum's scale comes from its largest value, so the whole sum first.
  // Uninitialised: rank 0's values are written over it first.
  const std::unique_ptr<float[]> sum(new float[n]);
  decodeSlice(format, from[0], n, sum.get());
  float block[kChunk];
  for (std::size_t r = 1; r < from.size(); ++r) {
    const HalfSpan span = spanOf(format, from[r]);
    for (std::size_t i = 0; i < n; i += kChunk) {
      const std::size_t c = std::min(kChunk, n - i);
      widen(span, i, block, c);
      for (std::size_t j = 0; j < c; ++j) sum[i + j] += block[j];
    }
  }
  encodeSlice(format, sum.get(), n, out, carried);
}

}  // namespace poseidon::sum16

namespace poseidon {

// The generic way, for communicators without an alltoall (the loopback): every rank's
// encoding goes to every rank (a broadcast from each; the bits travel as floats, which a
// copy keeps), and each rank reduces every slice itself, with the same arithmetic as an
// owner would. MPI's override moves only the owners' shares. Counted once as itself; not
// paced (the loopback has no link to pace). With feedback, each rank keeps every slice's
// sum residual, as it reduces every slice.
void Communicator::allreduceSum16(WireFormat format, const float* send, float* recv, std::size_t count,
                                  sum16::Feedback* feedback) {
  const int P = size();
  const sum16::Slices slices(count, P);
  const std::size_t floats = (slices.totalWords() + 1) / 2;
  std::vector<std::vector<float>> all(P, std::vector<float>(floats));
  sum16::encode(format, send, slices, reinterpret_cast<std::uint16_t*>(all[rank()].data()),
                feedback != nullptr ? &feedback->sent : nullptr);
  {
    const Uncounted quiet(*this);
    for (int r = 0; r < P; ++r) broadcast(all[r].data(), floats, r);
  }
  std::vector<std::uint16_t> reduced(slices.totalWords());
  for (int s = 0; s < P; ++s) {
    std::vector<const std::uint16_t*> from;
    for (int r = 0; r < P; ++r) from.push_back(reinterpret_cast<const std::uint16_t*>(all[r].data()) + slices.offset(s));
    sum16::reduceSlice(format, from, slices.length(s), reduced.data() + slices.offset(s),
                       sum16::Carried{feedback != nullptr ? &feedback->sum : nullptr, slices.begin(s)});
  }
  for (int s = 0; s < P; ++s) {
    sum16::decodeSlice(format, reduced.data() + slices.offset(s), slices.length(s), recv + slices.begin(s));
  }
  counted(allreduce16BytesSent(count, P));
}

}  // namespace poseidon
