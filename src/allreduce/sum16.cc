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

// out[0, n) = `values` (the residual's part already carried in) rounded at `scale`; the
// residual, if any, keeps what a receiver will not read, a chunk at a time.
void roundKeeping(WireFormat format, float scale, const float* values, std::size_t n, std::uint16_t* out,
                  Carried carried) {
  if (format == WireFormat::kBf16) {
    toBf16(values, out, n);
  } else {
    toFp16(values, out, n, scale);
  }
  if (carried.residual == nullptr) return;
  const HalfSpan read{format, scale, out};
  float block[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t c = std::min(kChunk, n - i);
    widen(read, i, block, c);
    carried.residual->keep(carried.at + i, block, c);
  }
}

// sum[0, c) = values [i, i + c) of every rank's slice, added in fp32 in rank order.
void sumChunk(const std::vector<HalfSpan>& ranks, std::size_t i, std::size_t c, float* sum) {
  float block[kChunk];
  widen(ranks[0], i, sum, c);
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    widen(ranks[r], i, block, c);
    for (std::size_t j = 0; j < c; ++j) sum[j] += block[j];
  }
}

}  // namespace

void encodeSlice(WireFormat format, const float* values, std::size_t n, std::uint16_t* out, Carried carried) {
  POSEIDON_ENFORCE(format != WireFormat::kFp32, "a 16-bit allreduce needs a 16-bit format");
  if (carried.residual != nullptr) values = carried.residual->carry(carried.at, values, n);
  const float scale = format == WireFormat::kFp16 ? fp16Scale(values, n) : 1.0f;
  std::memcpy(out, &scale, sizeof(float));
  roundKeeping(format, scale, values, n, out + Slices::kScaleWords, carried);
}

void encode(WireFormat format, const float* values, const Slices& slices, std::uint16_t* out, Residual* sent) {
  for (int s = 0; s < slices.parts(); ++s) {
    encodeSlice(format, values + slices.begin(s), slices.length(s), out + slices.offset(s),
                Carried{sent, slices.begin(s)});
  }
}

HalfSpan spanOfSlice(WireFormat format, const std::uint16_t* in) {
  return HalfSpan{format, scaleOf(format, in), in + Slices::kScaleWords};
}

void decodeSlice(WireFormat format, const std::uint16_t* in, std::size_t n, float* out) {
  widen(spanOfSlice(format, in), 0, out, n);
}

namespace {
std::vector<HalfSpan> spansOf(WireFormat format, const std::vector<const std::uint16_t*>& from) {
  POSEIDON_ENFORCE(!from.empty(), "a 16-bit sum needs a rank's values");
  std::vector<HalfSpan> ranks;
  for (const std::uint16_t* in : from) ranks.push_back(spanOfSlice(format, in));
  return ranks;
}

// out[0, n) = the fp32 sum of the encoded slices `from[r]` (n values each), added in rank
// order from rank 0's: what fp16's owner rounds, whose scale needs the whole sum first.
// (The step by owner reads the same sum as it steps: sgdStepViews.)
void sumSlice(WireFormat format, const std::vector<const std::uint16_t*>& from, std::size_t n, float* out) {
  const std::vector<HalfSpan> ranks = spansOf(format, from);
  for (std::size_t i = 0; i < n; i += kChunk) sumChunk(ranks, i, std::min(kChunk, n - i), out + i);
}
}  // namespace

void reduceSlice(WireFormat format, const std::vector<const std::uint16_t*>& from, std::size_t n,
                 std::uint16_t* out, Carried carried) {
  if (format == WireFormat::kFp16) {
    // The sum's scale comes from its largest value: the whole sum first. Uninitialised:
    // each chunk is written before it is read.
    const std::unique_ptr<float[]> sum(new float[n]);
    sumSlice(format, from, n, sum.get());
    encodeSlice(format, sum.get(), n, out, carried);
    return;
  }
  const std::vector<HalfSpan> ranks = spansOf(format, from);
  // bf16 has no scale, so the sum is rounded a chunk at a time as it is made: no slice-long
  // fp32 sum written and read back, the same arithmetic value for value.
  const float one = 1.0f;
  std::memcpy(out, &one, sizeof(float));
  float sum[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t c = std::min(kChunk, n - i);
    sumChunk(ranks, i, c, sum);
    const Carried here{carried.residual, carried.at + i};
    const float* values = here.residual != nullptr ? here.residual->carry(here.at, sum, c) : sum;
    roundKeeping(format, 1.0f, values, c, out + Slices::kScaleWords + i, here);
  }
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
  std::vector<float> mine(floats);  // this rank's encoding, in floats' storage as broadcast carries it
  sum16::encode(format, send, slices, reinterpret_cast<std::uint16_t*>(mine.data()),
                feedback != nullptr ? &feedback->sent : nullptr);
  const std::vector<std::vector<float>> all = broadcastEach(mine.data(), floats);
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
