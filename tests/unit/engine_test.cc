// The dependency engine: per-tag ordering (mutations alone and in push order, reads
// together), asynchronous tasks, external events, and errors that surface in waitAll.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/external_event.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

constexpr auto kTimeout = std::chrono::seconds(20);

TEST(Engine, MutationsOfOneTagRunInPushOrderEvenAcrossPoolsAndThreads) {
  FailureState failure;
  Engine engine(Engine::Threads{4, 4, 4}, failure);
  const auto tag = engine.newTag("x");
  std::mutex mu;
  std::vector<int> seen;
  for (int i = 0; i < 200; ++i) {
    const auto kind = static_cast<Engine::Kind>(i % 3);
    engine.push(
        [&, i] {
          if (i % 17 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
          std::lock_guard<std::mutex> lock(mu);
          seen.push_back(i);
        },
        {}, {tag}, kind);
  }
  engine.waitAll(kTimeout);
  ASSERT_EQ(seen.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(seen[i], i);
}

TEST(Engine, ReadsRunTogetherButNotWithAMutation) {
  FailureState failure;
  Engine engine(Engine::Threads{4, 1, 1}, failure);
  const auto tag = engine.newTag("x");
  std::atomic<int> readers{0}, max_readers{0};
  std::atomic<bool> writer_overlap{false};
  int value = 0;
  for (int round = 0; round < 5; ++round) {
    for (int r = 0; r < 4; ++r) {
      engine.push(
          [&, round] {
            const int now = ++readers;
            int m = max_readers.load();
            while (now > m && !max_readers.compare_exchange_weak(m, now)) {
            }
            EXPECT_EQ(value, round);  // every read sees the mutation pushed before it
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            --readers;
          },
          {tag}, {}, Engine::Kind::kCompute);
    }
    engine.push(
        [&] {
          if (readers.load() != 0) writer_overlap = true;
          ++value;
        },
        {tag}, {tag}, Engine::Kind::kCompute);  // in both lists: a mutation
  }
  engine.waitAll(kTimeout);
  EXPECT_EQ(value, 5);
  EXPECT_FALSE(writer_overlap.load());
  EXPECT_GT(max_readers.load(), 1) << "reads of one tag never ran together";
}

TEST(Engine, ATaskWaitsForAllItsTagsAndUnrelatedTagsDoNotBlock) {
  FailureState failure;
  Engine engine(Engine::Threads{2, 2, 2}, failure);
  const auto a = engine.newTag("a"), b = engine.newTag("b"), c = engine.newTag("c");
  ExternalEvent gate;
  engine.pushAsync([&](Engine::Done d) { gate.arm(std::move(d)); }, {}, {a}, Engine::Kind::kCopy);
  std::atomic<bool> joined{false}, independent{false};
  engine.push([&] { joined = true; }, {a, b}, {}, Engine::Kind::kCompute);
  engine.push([&] { independent = true; }, {b}, {c}, Engine::Kind::kCompute);
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (!independent && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(independent.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(joined.load()) << "ran before the event that mutates its tag";
  gate.fire();
  engine.waitAll(kTimeout);
  EXPECT_TRUE(joined.load());
}

TEST(Engine, ExternalEventMayFireBeforeOrAfterTheEngineStartsIt) {
  FailureState failure;
  Engine engine(Engine::Threads{1, 1, 1}, failure);
  const auto tag = engine.newTag("grad");
  ExternalEvent event;
  int runs = 0;
  for (int i = 0; i < 50; ++i) {
    if (i % 2 == 0) event.fire();  // before the task is pushed
    engine.pushAsync([&](Engine::Done d) { event.arm(std::move(d)); }, {}, {tag}, Engine::Kind::kCopy);
    engine.push([&] { ++runs; }, {tag}, {}, Engine::Kind::kCompute);
    if (i % 2 == 1) event.fire();  // after
    engine.waitAll(kTimeout);
  }
  EXPECT_EQ(runs, 50);
}

TEST(Engine, ATaskErrorEndsTheWaitWithThatError) {
  FailureState failure;
  Engine engine(Engine::Threads{1, 1, 1}, failure);
  const auto tag = engine.newTag("x");
  engine.push([] { throw InputError("broken task"); }, {}, {tag}, Engine::Kind::kCompute);
  engine.push([] {}, {tag}, {}, Engine::Kind::kCompute);  // never runs: its input failed
  EXPECT_THROW(engine.waitAll(kTimeout), InputError);
}

TEST(Engine, WaitingForAnEventThatNeverComesTimesOut) {
  FailureState failure;
  Engine engine(Engine::Threads{1, 1, 1}, failure);
  ExternalEvent never;
  engine.pushAsync([&](Engine::Done d) { never.arm(std::move(d)); }, {}, {engine.newTag("x")}, Engine::Kind::kCopy);
  EXPECT_THROW(engine.waitAll(std::chrono::milliseconds(100)), TimeoutError);
  engine.shutdown();
}

// An async body whose Done is called from another thread before the body has returned:
// the op (and the closure still running) must outlive both. Under ThreadSanitizer and
// AddressSanitizer (scripts/sanitize.sh) a use after free here is a report.
TEST(Engine, DoneFromAnotherThreadBeforeTheBodyReturns) {
  FailureState failure;
  Engine engine(Engine::Threads{1, 1, 2}, failure);
  const auto tag = engine.newTag("x");
  std::atomic<int> finished{0};
  std::mutex mu;
  std::vector<std::thread> reporters;  // joined before the engine goes
  for (int i = 0; i < 200; ++i) {
    std::vector<int> captured(64, i);  // a closure with state that a free would destroy
    engine.pushAsync(
        [&, captured](Engine::Done d) {
          {
            std::lock_guard<std::mutex> lock(mu);
            reporters.emplace_back([d = std::move(d)] { d(); });
          }
          std::this_thread::sleep_for(std::chrono::microseconds(50));  // still running after Done
          finished += captured[63] >= 0 ? 1 : 0;
        },
        {}, {tag}, Engine::Kind::kComm);
  }
  engine.waitAll(kTimeout);  // every Done called: all 200 reporters exist
  {
    // A body may still be inside emplace_back (its reporter already ran Done): take the lock.
    std::lock_guard<std::mutex> lock(mu);
    for (auto& t : reporters) t.join();  // a Done caller must be over before shutdown
  }
  engine.shutdown();  // joins the pools: every body has returned
  EXPECT_EQ(finished, 200);
}

// Ops that failed or never reported their end are freed by shutdown (LeakSanitizer
// checks it in the sanitizer step), and nothing runs after it.
TEST(Engine, ShutdownFreesOpsThatNeverEnded) {
  FailureState failure;
  Engine engine(Engine::Threads{1, 1, 1}, failure);
  const auto tag = engine.newTag("x");
  ExternalEvent never;
  engine.pushAsync([&](Engine::Done d) { never.arm(std::move(d)); }, {}, {tag}, Engine::Kind::kCopy);
  engine.push([] { throw InputError("broken"); }, {}, {engine.newTag("y")}, Engine::Kind::kCompute);
  std::atomic<bool> ran{false};
  engine.push([&] { ran = true; }, {tag}, {}, Engine::Kind::kCompute);  // waits on the op that never ends
  EXPECT_THROW(engine.waitAll(std::chrono::milliseconds(200)), Error);
  engine.shutdown();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace poseidon
