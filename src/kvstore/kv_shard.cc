#include "kvstore/kv_shard.h"

#include <algorithm>

#include "checkpoint/state_file.h"
#include "poseidon/errors.h"

namespace poseidon {

KVShard::KVShard(const InformationBook& book, int shard, const SgdOptions& options,
                 const std::function<float*(const KVPair&)>& storage, std::uint64_t start)
    : book_(book), shard_(shard), options_(options), workers_(book.cluster().workers()) {
  for (std::uint32_t key : book.pairsOfShard(shard)) {
    PairState& s = pairs_[key];
    s.version = start;
    s.values = storage(book.pair(key));
    if (options.momentum != 0.0f) s.momentum.assign(book.pair(key).length, 0.0f);
    s.pending.resize(workers_);
  }
}

void KVShard::addStateRecords(std::vector<StateRecord>& records) {
  std::vector<std::uint32_t> keys;
  for (const auto& [key, s] : pairs_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (auto key : keys) {
    auto& m = pairs_[key].momentum;
    if (!m.empty()) records.push_back(StateRecord{detail::cat("ps/pair", key, "/momentum"), m.data(), m.size() * sizeof(float)});
  }
}

const KVShard::PairState& KVShard::state(std::uint32_t key) const {
  auto it = pairs_.find(key);
  if (it == pairs_.end()) {
    throw CommError(detail::cat("KV pair ", key, " does not belong to shard ", shard_));
  }
  return it->second;
}

bool KVShard::push(std::uint32_t key, std::uint64_t iteration, int worker, Contribution c) {
  auto it = pairs_.find(key);
  if (it == pairs_.end()) {
    throw CommError(detail::cat("worker ", worker, " pushed KV pair ", key, " to shard ", shard_,
                                ", which does not hold it: the ranks' information books differ"));
  }
  PairState& s = it->second;
  if (worker < 0 || worker >= workers_) {
    throw CommError(detail::cat("KV pair ", key, ": update from rank ", worker, ", which is not a worker"));
  }
  if (iteration != s.version) {
    throw CommError(detail::cat("KV pair ", key, ": worker ", worker, " sent an update for iteration ",
                                iteration, " but the shard is at iteration ", s.version,
                                " (BSP allows no other)"));
  }
  if (s.pending[worker].data != nullptr) {
    throw CommError(detail::cat("KV pair ", key, ": worker ", worker, " sent two updates for iteration ",
                                iteration));
  }
  s.pending[worker] = std::move(c);
  if (++s.count < workers_) return false;

  std::vector<const float*> grads(workers_);
  for (int w = 0; w < workers_; ++w) grads[w] = s.pending[w].data;
  sgdStep(s.values, s.momentum.empty() ? nullptr : s.momentum.data(), grads, 1.0f / workers_,
          book_.pair(key).length, options_.at(s.version), s.version == 0);
  for (auto& p : s.pending) p = Contribution();
  s.count = 0;
  ++s.version;
  return true;
}

}  // namespace poseidon
