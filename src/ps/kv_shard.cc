#include "ps/kv_shard.h"

#include <algorithm>

#include "checkpoint/state_file.h"
#include "poseidon/errors.h"

namespace poseidon {

KVShard::KVShard(const InformationBook& book, int shard, const SgdOptions& options,
                 const std::function<float*(const KVPair&)>& storage, std::uint64_t start, int staleness)
    : book_(book), shard_(shard), options_(options), workers_(book.cluster().workers()), staleness_(staleness) {
  POSEIDON_ENFORCE(staleness >= 0, "staleness must not be negative");
  for (std::uint32_t key : book.pairsOfShard(shard)) {
    PairState& s = pairs_[key];
    s.version = start;
    s.values = storage(book.pair(key));
    if (options.momentum != 0.0f) s.momentum.assign(book.pair(key).length, 0.0f);
    s.pending.assign(static_cast<std::size_t>(staleness) + 1, std::vector<Contribution>(workers_));
    s.count.assign(static_cast<std::size_t>(staleness) + 1, 0);
  }
}

void KVShard::addStateRecords(std::vector<StateRecord>& records) {
  std::vector<std::uint32_t> keys;
  for (const auto& [key, s] : pairs_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (auto key : keys) {
    auto& m = pairs_[key].momentum;
    if (m.empty()) continue;
    const KVPair& kv = book_.pair(key);
    records.push_back(StateRecord{detail::cat("ps/pair", key, "/momentum"), m.data(), m.size() * sizeof(float),
                                  ParamSlice{kv.layer, kv.tensor, kv.offset}});
  }
}

const KVShard::PairState& KVShard::state(std::uint32_t key) const {
  auto it = pairs_.find(key);
  if (it == pairs_.end()) {
    throw CommError(detail::cat("KV pair ", key, " does not belong to shard ", shard_));
  }
  return it->second;
}

KVShard::PairState& KVShard::stateOf(std::uint32_t key) {
  auto it = pairs_.find(key);
  if (it == pairs_.end()) throw CommError(detail::cat("KV pair ", key, " does not belong to shard ", shard_));
  return it->second;
}

int KVShard::missing(std::uint32_t key) const {
  const PairState& s = state(key);
  return workers_ - s.count[s.slot()];
}

bool KVShard::ready(std::uint32_t key) const { return missing(key) == 0; }

bool KVShard::record(std::uint32_t key, std::uint64_t iteration, int worker, Contribution c) {
  auto it = pairs_.find(key);
  if (it == pairs_.end()) {
    throw CommError(detail::cat("worker ", worker, " pushed KV pair ", key, " to shard ", shard_,
                                ", which does not hold it: the ranks' information books differ"));
  }
  PairState& s = it->second;
  if (worker < 0 || worker >= workers_) {
    throw CommError(detail::cat("KV pair ", key, ": update from rank ", worker, ", which is not a worker"));
  }
  if (drops_allowed_ && iteration < s.version) {
    ++late_;  // its step went ahead without it; the worker has the fresh values already
    return false;
  }
  if (iteration < s.version || iteration > s.version + static_cast<std::uint64_t>(staleness_)) {
    throw CommError(detail::cat(
        "KV pair ", key, ": worker ", worker, " sent an update for iteration ", iteration,
        " but the shard is at iteration ", s.version,
        staleness_ == 0 ? " (BSP allows no other)"
                        : detail::cat(" (staleness ", staleness_, " allows up to ", s.version + staleness_, ")")));
  }
  const std::size_t slot = static_cast<std::size_t>(iteration % s.pending.size());
  if (s.pending[slot][worker].present()) {
    throw CommError(detail::cat("KV pair ", key, ": worker ", worker, " sent two updates for iteration ", iteration));
  }
  s.pending[slot][worker] = std::move(c);
  if (s.count[slot]++ == 0 && iteration == s.version) s.first_at = std::chrono::steady_clock::now();
  return s.count[s.slot()] == workers_;
}

bool KVShard::push(std::uint32_t key, std::uint64_t iteration, int worker, Contribution c) {
  if (!record(key, iteration, worker, std::move(c))) return false;
  step(key);
  return true;
}

int KVShard::step(std::uint32_t key) {
  PairState& s = stateOf(key);
  auto& pending = s.pending[s.slot()];
  // The updates present, in rank order: every run rounds the same way.
  std::vector<GradientView> grads;
  int unused = 0;
  for (int w = 0; w < workers_; ++w) {
    if (pending[w].unused) {
      ++unused;
    } else if (pending[w].present()) {
      grads.push_back(GradientView{pending[w].data, pending[w].half});
    }
  }
  if (unused > 0 && !grads.empty()) {
    throw CommError(detail::cat("KV pair ", key, ": ", unused, " workers said no rank used its layer in iteration ",
                                s.version, ", ", grads.size(), " sent a gradient"));
  }
  if (unused > 0) {  // as an optimizer skips a parameter whose .grad is None (DDP's rule)
    for (auto& p : pending) p = Contribution();
    s.count[s.slot()] = 0;
    ++s.version;
    if (s.count[s.slot()] > 0) s.first_at = std::chrono::steady_clock::now();
    return 0;
  }
  POSEIDON_ENFORCE(!grads.empty(), "a step needs at least one update");
  const int missing = workers_ - static_cast<int>(grads.size());
  dropped_ += static_cast<std::uint64_t>(missing);
  sgdStepViews(s.values, s.momentum.empty() ? nullptr : s.momentum.data(), grads,
          1.0f / static_cast<float>(grads.size() * static_cast<std::size_t>(options_.devices)), book_.pair(key).length,
          options_.at(s.version), s.version == 0 && !seeded_.load(std::memory_order_relaxed));
  for (auto& p : pending) p = Contribution();
  s.count[s.slot()] = 0;
  ++s.version;
  // The next step may have been waiting already (SSP): its clock starts now.
  if (s.count[s.slot()] > 0) s.first_at = std::chrono::steady_clock::now();
  return missing;
}

std::optional<std::chrono::steady_clock::time_point> KVShard::oldestWaiting() const {
  std::optional<std::chrono::steady_clock::time_point> oldest;
  for (const auto& [key, s] : pairs_) {
    if (s.count[s.slot()] > 0 && (!oldest || s.first_at < *oldest)) oldest = s.first_at;
  }
  return oldest;
}

std::vector<std::uint32_t> KVShard::overdue(std::chrono::steady_clock::time_point cutoff) const {
  std::vector<std::uint32_t> keys;
  for (const auto& [key, s] : pairs_) {
    if (s.count[s.slot()] > 0 && s.first_at <= cutoff) keys.push_back(key);
  }
  return keys;
}

}  // namespace poseidon
