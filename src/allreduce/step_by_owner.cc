#include "allreduce/step_by_owner.h"

#include <cstring>

#include "allreduce/communicator.h"
#include "allreduce/ring_order.h"
#include "allreduce/sum16.h"
#include "common/half.h"

namespace poseidon {

std::size_t PiecedBuffer::count() const {
  std::size_t n = 0;
  for (auto s : sizes) n += s;
  return n;
}

void PiecedBuffer::copyTo(std::size_t from, std::size_t len, float* out) const {
  forEach(from, len, [&](const float* at, std::size_t n, std::size_t offset) {
    std::memcpy(out + (offset - from), at, n * sizeof(float));
  });
}

void PiecedBuffer::copyFrom(std::size_t from, std::size_t len, const float* in) const {
  forEach(from, len, [&](float* at, std::size_t n, std::size_t offset) {
    std::memcpy(at, in + (offset - from), n * sizeof(float));
  });
}

std::vector<std::vector<float>> Communicator::broadcastEach(const float* send, std::size_t count) {
  const Uncounted quiet(*this);
  std::vector<std::vector<float>> all(size());
  for (int r = 0; r < size(); ++r) {
    all[r] = r == rank() ? std::vector<float>(send, send + count) : std::vector<float>(count);
    if (count > 0) broadcast(all[r].data(), count, r);
  }
  return all;
}

// The generic way, for communicators without point-to-point (the loopback): every rank's
// buffer to every rank, the owner's step of its slice from their ring-order sum (as MPI's
// owner gets it), then each owner's slice broadcast from it. Counted once as itself, a
// ring's bytes, as MPI's override moves.
void Communicator::allreduceStepped(const float* send, const PiecedBuffer& targets, const OwnerStep& step) {
  const int P = size(), me = rank();
  const std::size_t count = targets.count();
  const sum16::Slices slices(count, P);
  const std::vector<std::vector<float>> all = broadcastEach(send, count);
  std::vector<float> slice(slices.length(me));
  {
    const Uncounted quiet(*this);
    addSliceInRingOrder(all, count, me, slice.data());
    step(slices.begin(me), slices.length(me), {GradientView{slice.data(), {}}});
    for (int s = 0; s < P; ++s) {
      const std::size_t begin = slices.begin(s);
      slice.resize(slices.length(s));
      if (slice.empty()) continue;  // fewer values than ranks: the same slices empty on every rank
      if (s == me) targets.copyTo(begin, slice.size(), slice.data());
      broadcast(slice.data(), slice.size(), s);
      if (s != me) targets.copyFrom(begin, slice.size(), slice.data());
    }
  }
  counted(allreduceBytesSent(count, P));
}

namespace owner16 {

void stepOwnSlice(WireFormat format, const PiecedBuffer& targets, std::size_t begin, std::size_t n,
                  const std::vector<const std::uint16_t*>& from, const OwnerStep& step, std::uint16_t* out,
                  sum16::Carried carried, Scratch& scratch) {
  std::vector<float>& before = scratch.before;
  std::vector<float>& update = scratch.update;
  before.resize(n);
  update.resize(n);
  targets.copyTo(begin, n, before.data());
  std::vector<GradientView> views;
  for (const std::uint16_t* slice : from) views.push_back(GradientView{nullptr, sum16::spanOfSlice(format, slice)});
  step(begin, n, views);
  targets.copyTo(begin, n, update.data());
  // The update as a shard makes its kParams16 one (ParameterServer::stepPair): new minus
  // old, the residual carried in, rounded; then old + the update as it arrives everywhere.
  for (std::size_t i = 0; i < n; ++i) update[i] -= before[i];
  sum16::encodeSlice(format, update.data(), n, out, carried);
  sum16::decodeSlice(format, out, n, update.data());
  for (std::size_t i = 0; i < n; ++i) update[i] = before[i] + update[i];
  targets.copyFrom(begin, n, update.data());
}

void addUpdate(WireFormat format, const std::uint16_t* in, const PiecedBuffer& targets, std::size_t begin,
               std::size_t n) {
  constexpr std::size_t kChunk = 4096;  // floats widened at a time, added while in cache
  const HalfSpan span = sum16::spanOfSlice(format, in);
  float block[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t c = std::min(kChunk, n - i);
    widen(span, i, block, c);
    targets.forEach(begin + i, c, [&](float* at, std::size_t m, std::size_t offset) {
      const float* read = block + (offset - begin - i);
      for (std::size_t j = 0; j < m; ++j) at[j] += read[j];
    });
  }
}

}  // namespace owner16

// The generic way on a 16-bit wire, as the fp32 one: every rank's encoding to every rank
// (a broadcast from each, as Communicator::allreduceSum16), the owner's step of its slice
// from the P encoded contributions, then each owner's encoded update broadcast from it and added everywhere else.
// Only the owner keeps its slice's residual in `feedback->sum`, as over MPI.
void Communicator::allreduceStepped16(WireFormat format, const float* send, const PiecedBuffer& targets,
                                      const OwnerStep& step, sum16::Feedback* feedback) {
  const int P = size();
  const std::size_t count = targets.count();
  const sum16::Slices slices(count, P);
  const std::size_t floats = (slices.totalWords() + 1) / 2;
  std::vector<float> mine(floats);  // this rank's encoding, in floats' storage as broadcast carries it
  sum16::encode(format, send, slices, reinterpret_cast<std::uint16_t*>(mine.data()),
                feedback != nullptr ? &feedback->sent : nullptr);
  const std::vector<std::vector<float>> all = broadcastEach(mine.data(), floats);
  const auto words = [&](int r) { return reinterpret_cast<const std::uint16_t*>(all[r].data()); };
  {
    const Uncounted quiet(*this);
    const int me = rank();
    std::vector<const std::uint16_t*> from;
    for (int r = 0; r < P; ++r) from.push_back(words(r) + slices.offset(me));
    std::vector<float> update((slices.words(me) + 1) / 2);
    owner16::Scratch scratch;
    owner16::stepOwnSlice(format, targets, slices.begin(me), slices.length(me), from, step,
                          reinterpret_cast<std::uint16_t*>(update.data()),
                          sum16::Carried{feedback != nullptr ? &feedback->sum : nullptr, slices.begin(me)}, scratch);
    for (int s = 0; s < P; ++s) {
      std::vector<float> slice((slices.words(s) + 1) / 2);
      if (s == me) slice = update;
      broadcast(slice.data(), slice.size(), s);
      if (s != me) {
        owner16::addUpdate(format, reinterpret_cast<const std::uint16_t*>(slice.data()), targets, slices.begin(s),
                           slices.length(s));
      }
    }
  }
  counted(allreduce16BytesSent(count, P));
}

}  // namespace poseidon
