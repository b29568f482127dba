#include "client/progress_probe.h"

#include <algorithm>

#include "comm/transport.h"
#include "poseidon/errors.h"

namespace poseidon {

ProgressProbe::ProgressProbe(Transport& transport, int staleness)
    : transport_(transport), staleness_(static_cast<std::uint64_t>(std::max(staleness, 0))) {}

void ProgressProbe::trains(std::uint64_t iterations) { ended_.store(iterations, std::memory_order_relaxed); }

void ProgressProbe::onMessage(const Message& m) {
  const MessageHeader& h = m.header();
  if (h.source >= static_cast<std::uint32_t>(transport_.size())) {
    throw CommError(detail::cat("a progress message from rank ", h.source, " of a job of ", transport_.size()));
  }
  if (m.type() == MsgType::kWhere) {
    // The question's number goes back with the answer: a late answer to an older one is
    // told apart.
    try {
      Message here = Message::make(MsgType::kHere, h.key, static_cast<std::uint32_t>(transport_.rank()),
                                   ended_.load(std::memory_order_relaxed), 1);
      const bool waits = in_sync_.load(std::memory_order_relaxed) > 0 || timed_out_.load(std::memory_order_relaxed);
      here.payload()[0] = waits ? 1 : 0;
      transport_.send(static_cast<int>(h.source), std::move(here));
    } catch (const std::exception&) {  // stopping or leaving: the asker hears silence, as from a dead rank
    }
    return;
  }
  if (m.payloadBytes() != 1 || m.payload()[0] > 1) {
    throw CommError(detail::cat("a progress answer of ", m.payloadBytes(), " bytes, not one byte of 0 or 1"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (h.key != question_ || answers_.empty()) return;
  answers_[h.source] = Answer(h.iteration, m.payload()[0] != 0);
  cv_.notify_all();
}

std::vector<ProgressProbe::Answer> ProgressProbe::ask(std::chrono::milliseconds limit) {
  const int me = transport_.rank(), n = transport_.size();
  std::uint32_t question = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    question = ++question_;
    answers_.assign(static_cast<std::size_t>(n), Answer());
    answers_[static_cast<std::size_t>(me)] = Answer(ended_.load(std::memory_order_relaxed));
  }
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    try {
      transport_.send(r, Message::make(MsgType::kWhere, question, static_cast<std::uint32_t>(me), 0, 0));
    } catch (const std::exception&) {  // a transport that can no longer send: r stays silent
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, limit, [&] {
    return std::none_of(answers_.begin(), answers_.end(), [](const Answer& a) { return a.ended == kSilent; });
  });
  return answers_;
}

void ProgressProbe::explain(const TimeoutError& e, std::chrono::milliseconds limit) {
  std::lock_guard<std::mutex> lock(explain_mu_);
  timed_out_.store(true, std::memory_order_relaxed);
  // The failure flag rethrows one timeout at every later call (the hand-overs, the waits
  // of the teardown): it is asked about once.
  if (explained_ && explained_what_ == e.what()) std::rethrow_exception(explained_);
  bool names_rank = false;
  const std::string why = explainAnswers(ask(limit), transport_.rank(), names_rank, staleness_);
  // Only a named rank makes a CulpritTimeout naming a worker (the front ends end the job at
  // once). Otherwise the timeout keeps its kind: a plain one ended the job at once before
  // the probe too, and a PS one naming no worker (silent shards, or every worker) keeps its
  // grace (CulpritTimeout::kIndirectWitnessGrace), so a direct witness may still speak.
  const bool keeps_grace = dynamic_cast<const CulpritTimeout*>(&e) != nullptr;
  explained_what_ = e.what();
  if (names_rank) {
    explained_ = std::make_exception_ptr(CulpritTimeout(e.what() + why, true));
  } else if (keeps_grace) {
    explained_ = std::make_exception_ptr(CulpritTimeout(e.what() + why, false));
  } else {
    explained_ = std::make_exception_ptr(TimeoutError(e.what() + why));
  }
  std::rethrow_exception(explained_);
}

namespace {

std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() > 1 ? "ranks " : "rank ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += detail::cat(i ? ", " : "", ranks[i]);
  return s;
}

}  // namespace

std::string explainAnswers(const std::vector<ProgressProbe::Answer>& answers, int me, bool& names_rank,
                           std::uint64_t staleness) {
  using Answer = ProgressProbe::Answer;
  const std::uint64_t mine = answers.at(static_cast<std::size_t>(me)).ended;
  std::vector<int> silent, behind, held;  // held: behind, but waiting in a sync on others
  for (std::size_t r = 0; r < answers.size(); ++r) {
    const Answer& a = answers[r];
    if (a.ended == ProgressProbe::kSilent) silent.push_back(static_cast<int>(r));
    if (a.ended == ProgressProbe::kServes || a.ended == ProgressProbe::kSilent || mine == ProgressProbe::kServes) {
      continue;
    }
    if (a.ended + staleness < mine) (a.in_sync ? held : behind).push_back(static_cast<int>(r));
  }
  const auto counts = [&](const std::vector<int>& ranks) {
    std::string list;
    for (int r : ranks) list += detail::cat(list.empty() ? "" : ", ", answers[static_cast<std::size_t>(r)].ended);
    return list;
  };
  // Silence from every peer at once points at this rank's own link, not at theirs.
  names_rank = !behind.empty() || (!silent.empty() && silent.size() + 1 < answers.size());
  std::string why;
  // "Ended" counts the iterations whose gradients a rank has handed over.
  if (behind.size() == 1) {
    const std::uint64_t ended = answers[static_cast<std::size_t>(behind[0])].ended;
    why += detail::cat("; ", rankList(behind), " has ended ", ended, " iteration", ended == 1 ? "" : "s",
                       ", this rank ", mine, ": stalled in its training loop, or far slower");
  } else if (!behind.empty()) {
    why += detail::cat("; ", rankList(behind), " have ended fewer iterations than this rank (", counts(behind), " against ",
                       mine, "): stalled in their training loops, or far slower");
  }
  if (!held.empty()) {
    why += detail::cat("; ", rankList(held), held.size() > 1 ? " are" : " is", " behind too (", counts(held),
                       " iterations ended) but wait", held.size() > 1 ? "" : "s", " in a sync, on others");
  }
  if (!silent.empty()) {
    why += detail::cat("; ", rankList(silent), " did not answer (stopped, hung or dead)");
  }
  if (behind.empty() && silent.empty() && mine != ProgressProbe::kServes) {
    // Not a loop behind: what was sent did not arrive, or a part of a rank other than its
    // loop (a shard, a syncer) stalled.
    why += detail::cat("; every rank answers and no training rank is ", held.empty() ? "" : "stalled ",
                       "behind this one (", mine, " iteration", mine == 1 ? "" : "s",
                       " ended): the exchange itself stalled");
  }
  return why;
}

}  // namespace poseidon
