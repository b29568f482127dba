#include "data/partition.h"

#include <numeric>
#include <random>

#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

Partition::Partition(std::int64_t examples, int workers, int worker, std::int64_t batch, std::uint64_t seed)
    : examples_(examples), workers_(workers), worker_(worker), batch_(batch), seed_(seed) {
  if (batch_ <= 0) throw OptionError(detail::cat("{batch=", batch_, "}: the batch must hold at least one example"));
  if (batch_ * workers_ > examples_) {
    throw OptionError(detail::cat("{batch=", batch_, "} with ", workers_, " workers needs ", batch_ * workers_,
                                  " examples per step, but the training set has ", examples_));
  }
}

void Partition::shuffleFor(std::int64_t epoch) {
  if (epoch == shuffled_epoch_) return;
  order_.resize(examples_);
  std::iota(order_.begin(), order_.end(), 0);
  // Fisher-Yates with an explicit generator: std::shuffle's algorithm is unspecified, and
  // every rank (and every run) must derive the same permutation.
  std::mt19937_64 rng(seed_ * 1000003ULL + static_cast<std::uint64_t>(epoch));
  for (std::int64_t i = examples_ - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
  shuffled_epoch_ = epoch;
}

std::vector<std::int64_t> Partition::batch(std::int64_t epoch, std::int64_t b) {
  shuffleFor(epoch);
  const std::int64_t start = (b * workers_ + worker_) * batch_;
  return std::vector<std::int64_t>(order_.begin() + start, order_.begin() + start + batch_);
}

}  // namespace poseidon
