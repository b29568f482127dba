// Who is behind, when a sync runs out its timeout (what Horovod's stall inspector does when
// it names the ranks that never submitted a tensor). A collective cannot tell which rank
// did not join it, and an allreduce layer has no messages of its own to miss; but every
// rank's transport thread answers while its training loop is stuck. So the rank whose wait
// ran out asks every other rank how many iterations its loop has ended and whether it waits
// in a sync itself (kWhere), waits a moment for the answers (kHere), and names the ranks
// behind it that do not wait on others (stalled in their loops) and those that did not
// answer (a stopped, hung or dead process). A rank behind that waits in a sync is itself
// held up: it is said, not named.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "comm/message.h"

namespace poseidon {

class Transport;
class TimeoutError;

class ProgressProbe {
 public:
  // How long an explanation waits for the answers: a live peer's transport thread answers
  // within milliseconds.
  static constexpr std::chrono::milliseconds kAnswerLimit{2000};

  // `staleness`: how many iterations a healthy rank may be behind (SSP), not named for it.
  explicit ProgressProbe(Transport& transport, int staleness = 0);

  // This rank trains (a rank that only serves answers that it does), and its loop has
  // ended `iterations` iterations so far (counted from the run's start, a resumed run's
  // checkpoint included). Any thread.
  void trains(std::uint64_t iterations);

  // While one lives, this rank's loop waits in a sync: on its peers, not stalled in its own
  // code. The session holds one around the loop's waits. After explain() a rank answers
  // that it waits for good: its own sync ran out waiting on others.
  class InSync {
   public:
    explicit InSync(ProgressProbe& p) : p_(p) { p_.in_sync_.fetch_add(1, std::memory_order_relaxed); }
    ~InSync() { p_.in_sync_.fetch_sub(1, std::memory_order_relaxed); }
    InSync(const InSync&) = delete;
    InSync& operator=(const InSync&) = delete;

   private:
    ProgressProbe& p_;
  };

  // kWhere (answered at once) and kHere, on the transport's thread.
  void onMessage(const Message& m);

  // Throws `e` explained: a CulpritTimeout naming the ranks behind this one (not waiting in
  // a sync) or those that did not answer within `limit` (some, not all, of them); else
  // `e`'s own kind (a TimeoutError, or a CulpritTimeout naming no worker) with what the
  // answers say (every peer silent, or none stalled behind).
  [[noreturn]] void explain(const TimeoutError& e, std::chrono::milliseconds limit = kAnswerLimit);

  // One rank's answer: its iterations ended, or kServes, or kSilent where none came; and
  // whether its loop waited in a sync when it answered.
  static constexpr std::uint64_t kServes = UINT64_MAX;
  static constexpr std::uint64_t kSilent = UINT64_MAX - 1;
  struct Answer {
    explicit Answer(std::uint64_t e = kSilent, bool waits = false) : ended(e), in_sync(waits) {}
    std::uint64_t ended;
    bool in_sync;
  };
  // The answers of every other rank to one question, those silent within `limit` kSilent.
  // Index: rank (this rank's own entry is its own).
  std::vector<Answer> ask(std::chrono::milliseconds limit);

 private:
  Transport& transport_;
  const std::uint64_t staleness_;
  std::atomic<std::uint64_t> ended_{kServes};
  std::atomic<int> in_sync_{0};       // InSync guards alive
  std::atomic<bool> timed_out_{false};  // explain() ran: this rank's own sync ran out

  // Held through explain(): the hand-overs (a staging thread) and the waits (the loop) may
  // run out together; one asks, the other reads its explanation.
  std::mutex explain_mu_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::uint32_t question_ = 0;          // guarded by mu_: the sequence number of the last one asked
  std::vector<Answer> answers_;         // guarded by mu_: to the last question, by rank
  std::string explained_what_;          // guarded by explain_mu_: the last timeout explained,
  std::exception_ptr explained_;        // and what explain() threw for it
};

// What `answers` (ProgressProbe::ask) say about the ranks that stalled a sync of this rank
// (`me`), a rank more than `staleness` iterations behind counting as behind: "" on a rank
// that only serves and hears every rank. `names_rank`: a rank answered that it is behind
// and not waiting in a sync, or some (not all) peers were silent.
std::string explainAnswers(const std::vector<ProgressProbe::Answer>& answers, int me, bool& names_rank,
                           std::uint64_t staleness = 0);

}  // namespace poseidon
