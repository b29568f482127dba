#include "client/progress_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "comm/loopback_transport.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

using std::chrono::milliseconds;

// Three ranks over the loopback: each answers through its probe, except those `deaf` (a
// stopped process: its transport takes the question, nobody answers).
struct Ranks {
  explicit Ranks(std::vector<bool> deaf) : hub(static_cast<int>(deaf.size())) {
    for (std::size_t r = 0; r < deaf.size(); ++r) probes.push_back(std::make_unique<ProgressProbe>(hub.transport(r)));
    for (std::size_t r = 0; r < deaf.size(); ++r) {
      ProgressProbe* p = probes[r].get();
      const bool silent = deaf[r];
      TransportCallbacks callbacks;
      callbacks.on_message = [p, silent](Message m) {
        if (!silent) p->onMessage(m);
      };
      hub.transport(static_cast<int>(r)).start(std::move(callbacks));
    }
  }
  ~Ranks() {
    for (int r = 0; r < static_cast<int>(probes.size()); ++r) hub.transport(r).stop();
  }
  LoopbackHub hub;
  std::vector<std::unique_ptr<ProgressProbe>> probes;
};

TEST(ProgressProbe, NamesTheRankBehindAndTheOneThatDoesNotAnswer) {
  Ranks ranks({false, false, true});
  ranks.probes[0]->trains(4);
  ranks.probes[1]->trains(3);
  ranks.probes[2]->trains(4);
  const auto answers = ranks.probes[0]->ask(milliseconds(2000));
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].ended, 4u);
  EXPECT_EQ(answers[1].ended, 3u);
  EXPECT_EQ(answers[2].ended, ProgressProbe::kSilent);
  try {
    ranks.probes[0]->explain(TimeoutError("rank 0: sync of layer 'fc1' for iteration 3 did not happen"),
                             milliseconds(2000));
    FAIL() << "explain must throw";
  } catch (const CulpritTimeout& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("rank 0: sync of layer 'fc1' for iteration 3 did not happen", 0), 0u) << what;
    EXPECT_NE(what.find("; rank 1 has ended 3 iterations, this rank 4: stalled in its training loop"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("; rank 2 did not answer (stopped, hung or dead)"), std::string::npos) << what;
    EXPECT_TRUE(e.namesWorker());
  }
}

// Every rank answered and none is behind: the exchange itself stalled. No rank is named,
// so it stays a plain TimeoutError (the front ends' witness grace is for CulpritTimeout).
TEST(ProgressProbe, SaysTheExchangeStalledWhenNoRankIsBehind) {
  Ranks ranks({false, false, false});
  for (auto& p : ranks.probes) p->trains(7);
  try {
    ranks.probes[1]->explain(TimeoutError("the collective did not happen"), milliseconds(2000));
    FAIL() << "explain must throw";
  } catch (const CulpritTimeout& e) {
    FAIL() << "no rank is behind, yet: " << e.what();
  } catch (const TimeoutError& e) {
    EXPECT_STREQ(e.what(),
                 "the collective did not happen; every rank answers and no training rank is behind this one "
                 "(7 iterations ended): the exchange itself stalled");
  }
}

// The failure flag rethrows one timeout at every later call: it is asked about once, and
// the same explanation comes back at once, even with every peer gone quiet since.
TEST(ProgressProbe, ExplainsOneTimeoutOnce) {
  Ranks ranks({false, false, false});
  for (auto& p : ranks.probes) p->trains(3);
  ranks.probes[2]->trains(2);
  const TimeoutError e("the wait did not happen");
  std::string first;
  try {
    ranks.probes[0]->explain(e, milliseconds(2000));
  } catch (const CulpritTimeout& c) {
    first = c.what();
  }
  EXPECT_NE(first.find("rank 2 has ended 2 iterations, this rank 3"), std::string::npos) << first;
  for (int r = 1; r < 3; ++r) ranks.hub.transport(r).stop();
  const auto start = std::chrono::steady_clock::now();
  try {
    ranks.probes[0]->explain(e, milliseconds(2000));
  } catch (const CulpritTimeout& c) {
    EXPECT_EQ(c.what(), first);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
}

// A rank that only serves is never behind; silence from every peer at once points at this
// rank's own link, so it names no worker for the CLI's witness rule.
TEST(ProgressProbe, ServingRanksAreNotBehindAndAllSilentNamesNoWorker) {
  Ranks ranks({false, false, false});
  ranks.probes[0]->trains(2);
  ranks.probes[1]->trains(2);  // rank 2 never calls trains(): it only serves
  const auto answers = ranks.probes[0]->ask(milliseconds(2000));
  EXPECT_EQ(answers[2].ended, ProgressProbe::kServes);
  bool names = true;
  EXPECT_EQ(explainAnswers(answers, 2, names), "");  // the serving rank itself, hearing every rank
  EXPECT_FALSE(names);
  EXPECT_EQ(explainAnswers(answers, 0, names).rfind("; every rank answers and no training rank is behind", 0), 0u);
  EXPECT_FALSE(names);
  using A = ProgressProbe::Answer;
  const std::vector<A> silent{A(5), A(ProgressProbe::kSilent), A(ProgressProbe::kSilent)};
  EXPECT_EQ(explainAnswers(silent, 0, names), "; ranks 1, 2 did not answer (stopped, hung or dead)");
  EXPECT_FALSE(names);
  const std::vector<A> two_behind{A(5), A(3), A(4)};
  EXPECT_EQ(explainAnswers(two_behind, 0, names),
            "; ranks 1, 2 have ended fewer iterations than this rank (3, 4 against 5): stalled in their training "
            "loops, or far slower");
  EXPECT_TRUE(names);
}

// A PS wait that names only the silent shards (a CulpritTimeout naming no worker) is asked
// about too: a stopped rank the shard waits on is named, so no grace is needed; with no
// rank named it stays a CulpritTimeout naming no worker, the grace kept.
TEST(ProgressProbe, NamesTheRankASilentShardWaitsOn) {
  Ranks ranks({false, true, false});
  for (auto& p : ranks.probes) p->trains(3);
  const CulpritTimeout shards_only("fresh values did not happen; no fresh values from the shard on rank 0", false);
  try {
    ranks.probes[2]->explain(shards_only, milliseconds(2000));
    FAIL() << "explain must throw";
  } catch (const CulpritTimeout& e) {
    EXPECT_STREQ(e.what(),
                 "fresh values did not happen; no fresh values from the shard on rank 0; rank 1 did not answer "
                 "(stopped, hung or dead)");
    EXPECT_TRUE(e.namesWorker());
  }
  Ranks healthy({false, false, false});
  for (auto& p : healthy.probes) p->trains(3);
  try {
    healthy.probes[2]->explain(shards_only, milliseconds(2000));
    FAIL() << "explain must throw";
  } catch (const CulpritTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("the exchange itself stalled"), std::string::npos) << e.what();
    EXPECT_FALSE(e.namesWorker());
  }
}

// A rank behind that waits in a sync is held up by others: it is said, not named; the one
// stalled in its own loop is named.
TEST(ProgressProbe, ARankBehindThatWaitsInASyncIsNotNamed) {
  using A = ProgressProbe::Answer;
  bool names = true;
  const std::vector<A> held{A(3), A(2, true), A(3)};
  EXPECT_EQ(explainAnswers(held, 0, names),
            "; rank 1 is behind too (2 iterations ended) but waits in a sync, on others; every rank answers and no "
            "training rank is stalled behind this one (3 iterations ended): the exchange itself stalled");
  EXPECT_FALSE(names);
  const std::vector<A> chain{A(3), A(2, true), A(2)};
  EXPECT_EQ(explainAnswers(chain, 0, names),
            "; rank 2 has ended 2 iterations, this rank 3: stalled in its training loop, or far slower; rank 1 is "
            "behind too (2 iterations ended) but waits in a sync, on others");
  EXPECT_TRUE(names);
  const std::vector<A> stopped{A(3), A(2, true), A()};
  EXPECT_EQ(explainAnswers(stopped, 0, names),
            "; rank 1 is behind too (2 iterations ended) but waits in a sync, on others; rank 2 did not answer "
            "(stopped, hung or dead)");
  EXPECT_TRUE(names);
  // Over the transport: the answer carries the flag while an InSync lives.
  Ranks ranks({false, false, false});
  ranks.probes[0]->trains(3);
  ranks.probes[1]->trains(2);
  ranks.probes[2]->trains(3);
  {
    const ProgressProbe::InSync waiting(*ranks.probes[1]);
    const auto answers = ranks.probes[0]->ask(milliseconds(2000));
    EXPECT_EQ(answers[1].ended, 2u);
    EXPECT_TRUE(answers[1].in_sync);
    EXPECT_FALSE(answers[2].in_sync);
  }
  EXPECT_FALSE(ranks.probes[0]->ask(milliseconds(2000))[1].in_sync);
  // A rank whose own sync ran out waited on others: it says so from then on.
  EXPECT_THROW(ranks.probes[1]->explain(TimeoutError("its wait did not happen"), milliseconds(2000)), TimeoutError);
  EXPECT_TRUE(ranks.probes[0]->ask(milliseconds(2000))[1].in_sync);
}

// Under SSP a healthy rank may be up to `staleness` iterations behind: only beyond is it named.
TEST(ProgressProbe, StalenessIsNotStalling) {
  bool names = false;
  using A = ProgressProbe::Answer;
  const std::vector<A> answers{A(5), A(4), A(3)};
  EXPECT_EQ(explainAnswers(answers, 0, names, 1),
            "; rank 2 has ended 3 iterations, this rank 5: stalled in its training loop, or far slower");
  EXPECT_TRUE(names);
}

}  // namespace
}  // namespace poseidon
