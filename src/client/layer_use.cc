#include "client/layer_use.h"

#include <algorithm>

#include "comm/transport.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

// Iterations a rank keeps its use for: another rank asks about the iteration it ends, which
// this one has ended too or will end next (BSP); SSP lets it run `staleness` ahead.
constexpr std::size_t kKept = 64;

}  // namespace

LayerUse::LayerUse(Transport& transport) : transport_(transport) {}

void LayerUse::record(std::uint64_t t, const std::vector<bool>& used) {
  std::vector<int> to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine_[t] = used;
    while (mine_.size() > kKept) mine_.erase(mine_.begin());
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->first == t) {
        to.push_back(it->second);
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (int r : to) answer(t, r, used);
}

void LayerUse::answer(std::uint64_t t, int to, const std::vector<bool>& used) {
  Message m = Message::make(MsgType::kUse, 0, static_cast<std::uint32_t>(transport_.rank()), t, used.size());
  for (std::size_t l = 0; l < used.size(); ++l) m.payload()[l] = used[l] ? 1 : 0;
  try {
    transport_.send(to, std::move(m));
  } catch (const std::exception&) {  // stopping or leaving: the asker hears silence and times out naming this rank
  }
}

void LayerUse::onMessage(const Message& m) {
  const MessageHeader& h = m.header();
  const int from = static_cast<int>(h.source);
  if (from >= transport_.size()) {
    throw CommError(detail::cat("a layer-use message from rank ", from, " of a job of ", transport_.size()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (m.type() == MsgType::kUseAsk) {
    auto it = mine_.find(h.iteration);
    if (it == mine_.end()) {
      waiting_.emplace_back(h.iteration, from);  // answered when this rank's loop records it
      return;
    }
    const std::vector<bool> used = it->second;
    lock.unlock();
    answer(h.iteration, from, used);
    return;
  }
  if (h.iteration != asked_ || answers_.empty()) return;  // a late answer to an older question
  std::vector<bool> used(m.payloadBytes());
  for (std::size_t l = 0; l < used.size(); ++l) {
    if (m.payload()[l] > 1) throw CommError(detail::cat("a layer-use answer from rank ", from, " holding byte ", int{m.payload()[l]}));
    used[l] = m.payload()[l] != 0;
  }
  answers_[static_cast<std::size_t>(from)] = std::move(used);
  cv_.notify_all();
}

std::vector<bool> LayerUse::unusedByAll(std::uint64_t t, std::chrono::milliseconds limit) {
  const int me = transport_.rank(), n = transport_.size();
  std::vector<bool> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine = mine_.at(t);
    asked_ = t;
    answers_.assign(static_cast<std::size_t>(n), {});
    answers_[static_cast<std::size_t>(me)] = mine;
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) transport_.send(r, Message::make(MsgType::kUseAsk, 0, static_cast<std::uint32_t>(me), t, 0));
  }
  std::unique_lock<std::mutex> lock(mu_);
  const auto all_in = [&] {
    return std::none_of(answers_.begin(), answers_.end(), [](const std::vector<bool>& a) { return a.empty(); });
  };
  if (!cv_.wait_for(lock, limit, all_in)) {
    std::string silent;
    for (int r = 0; r < n; ++r) {
      if (answers_[r].empty()) silent += detail::cat(silent.empty() ? "" : ", ", r);
    }
    answers_.clear();
    throw TimeoutError(detail::cat("iteration ", t, ": which layers the other ranks used: no answer within ",
                                   limit.count(), " ms from rank ", silent));
  }
  std::vector<bool> unused(mine.size(), true);
  for (const auto& a : answers_) {
    if (a.size() != mine.size()) {
      throw CommError(detail::cat("a layer-use answer of ", a.size(), " layers for a model of ", mine.size()));
    }
    for (std::size_t l = 0; l < a.size(); ++l) unused[l] = unused[l] && !a[l];
  }
  answers_.clear();
  return unused;
}

}  // namespace poseidon
