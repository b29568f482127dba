#include "allreduce/step_by_owner.h"

#include <cstring>

#include "allreduce/communicator.h"
#include "allreduce/sum16.h"

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

// The generic way, for communicators without an alltoall (the loopback): the whole sum on
// every rank, the owner's step of its slice, then each owner's slice broadcast from it.
// Counted once as itself, a ring's bytes, as MPI's override moves.
void Communicator::allreduceStepped(const float* send, const PiecedBuffer& targets, const OwnerStep& step) {
  const std::size_t count = targets.count();
  const sum16::Slices slices(count, size());
  std::vector<float> sums(count);
  std::vector<float> slice;
  {
    const Uncounted quiet(*this);
    allreduceSum(send, sums.data(), count);
    const std::size_t mine = slices.begin(rank());
    step(mine, slices.length(rank()), sums.data() + mine);
    for (int s = 0; s < size(); ++s) {
      const std::size_t begin = slices.begin(s);
      slice.resize(slices.length(s));
      if (slice.empty()) continue;  // fewer values than ranks: the same slices empty on every rank
      if (s == rank()) targets.copyTo(begin, slice.size(), slice.data());
      broadcast(slice.data(), slice.size(), s);
      if (s != rank()) targets.copyFrom(begin, slice.size(), slice.data());
    }
  }
  counted(allreduceBytesSent(count, size()));
}

}  // namespace poseidon
