// The bandwidth manager's parts without MPI: the budget (token bucket) on a virtual clock,
// and the send queue's order, window and budget.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "bandwidth/send_policy.h"
#include "bandwidth/send_queue.h"
#include "bandwidth/token_bucket.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

using Clock = TokenBucket::Clock;
using std::chrono::milliseconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

TEST(TokenBucket, UnlimitedNeverWaits) {
  TokenBucket b(0, 0, kT0);
  b.charge(1e12, kT0);
  EXPECT_FALSE(b.limited());
  EXPECT_EQ(b.wait(kT0), Clock::duration::zero());
}

TEST(TokenBucket, ADebtIsWaitedOffAtTheRate) {
  TokenBucket b(1000, 500, kT0);  // 1000 bytes/s, 500 bytes of burst
  EXPECT_EQ(b.wait(kT0), Clock::duration::zero());
  b.charge(1500, kT0);  // 1000 bytes in debt: one second
  EXPECT_NEAR(std::chrono::duration<double>(b.wait(kT0)).count(), 1.0, 1e-3);
  EXPECT_NEAR(std::chrono::duration<double>(b.wait(kT0 + milliseconds(400))).count(), 0.6, 1e-3);
  EXPECT_EQ(b.wait(kT0 + milliseconds(1001)), Clock::duration::zero());
}

TEST(TokenBucket, NoPeriodCarriesMoreThanRateTimesTimePlusBurstPlusOneMessage) {
  const double rate = 25e6, burst = 2 << 20, message = 3 << 20;  // 200 mbit, a KV pair, a larger message
  TokenBucket b(rate, burst, kT0);
  std::vector<std::pair<double, double>> sends;  // (seconds since kT0, bytes)
  for (auto t = kT0; t < kT0 + std::chrono::seconds(10); t += std::chrono::microseconds(500)) {
    if (b.wait(t) > Clock::duration::zero()) continue;
    b.charge(message, t);
    sends.emplace_back(std::chrono::duration<double>(t - kT0).count(), message);
  }
  ASSERT_GT(sends.size(), 10u);
  for (std::size_t i = 0; i < sends.size(); ++i) {
    double bytes = 0;
    for (std::size_t j = i; j < sends.size(); ++j) {
      bytes += sends[j].second;
      const double period = sends[j].first - sends[i].first;
      ASSERT_LE(bytes, rate * period + burst + message + 1) << "from send " << i << " to " << j;
    }
  }
  // And it does not starve either: the long-run rate is the budget's.
  const double total = sends.size() * message;
  EXPECT_NEAR(total / 10.0, rate, 0.05 * rate);
}

TEST(TokenBucket, AcquireBlocksUntilTheDebtIsPaid) {
  TokenBucket b(1e6, 0);         // 1 MB/s, no burst
  b.charge(50e3, Clock::now());  // 50 ms of debt
  const auto begin = Clock::now();
  b.acquire(1, nullptr);
  const double waited = std::chrono::duration<double>(Clock::now() - begin).count();
  EXPECT_GE(waited, 0.045);
  EXPECT_LT(waited, 2.0);
}

TEST(TokenBucket, CountsTheFramesOfTcpOverEthernet) {
  EXPECT_NEAR(nicBytes(1448), 1514, 1e-9);
  EXPECT_GT(nicBytes(1 << 20), 1 << 20);
}

using Queue = SendQueue<std::string>;

std::vector<std::string> drain(Queue& q, TokenBucket& budget) {
  std::vector<std::string> order;
  while (auto e = q.pop(0, 0, budget, kT0)) order.push_back(e->item);
  return order;
}

TEST(SendQueue, PriorityOrderPutsLowerLayersAndControlFirstAndKeepsTiesInOrder) {
  TokenBucket none(0, 0, kT0);
  Queue q(SendOrder::kPriority);
  q.push("layer5", 5, 10, true, kT0);
  q.push("layer3a", 3, 10, true, kT0);
  q.push("layer7", 7, 10, true, kT0);
  q.push("layer3b", 3, 10, true, kT0);
  q.push("control", -1, 10, true, kT0);
  EXPECT_EQ(drain(q, none), (std::vector<std::string>{"control", "layer3a", "layer3b", "layer5", "layer7"}));
  EXPECT_TRUE(q.empty());
}

TEST(SendQueue, FifoOrderIgnoresPriority) {
  TokenBucket none(0, 0, kT0);
  Queue q(SendOrder::kFifo);
  q.push("layer5", 5, 10, true, kT0);
  q.push("layer3", 3, 10, true, kT0);
  q.push("control", -1, 10, true, kT0);
  EXPECT_EQ(drain(q, none), (std::vector<std::string>{"layer5", "layer3", "control"}));
}

TEST(SendQueue, TheWindowHoldsMessagesBackAndLetsALargeOneGoAlone) {
  TokenBucket none(0, 0, kT0);
  Queue q(SendOrder::kPriority);
  q.push("small", 0, 50, true, kT0);
  EXPECT_FALSE(q.pop(60, 100, none, kT0)) << "60 + 50 bytes exceed a window of 100";
  EXPECT_TRUE(q.pop(50, 100, none, kT0));
  q.push("large", 0, 500, true, kT0);
  EXPECT_FALSE(q.pop(1, 100, none, kT0));
  EXPECT_TRUE(q.pop(0, 100, none, kT0)) << "larger than the window, alone";
  q.push("any", 0, 500, true, kT0);
  EXPECT_TRUE(q.pop(1000, 0, none, kT0)) << "window 0: no window";
}

TEST(SendQueue, AMoreUrgentMessageOvertakesOnesTheWindowHeldBack) {
  TokenBucket none(0, 0, kT0);
  Queue q(SendOrder::kPriority);
  q.push("top layer", 9, 60, true, kT0);
  q.push("next top", 8, 60, true, kT0);
  auto first = q.pop(0, 100, none, kT0);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->item, "next top");
  EXPECT_FALSE(q.pop(60, 100, none, kT0));
  q.push("bottom layer", 0, 60, true, kT0);  // made while the window was full
  auto second = q.pop(0, 100, none, kT0);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->item, "bottom layer");
}

TEST(SendQueue, TheBudgetHoldsTheQueueButNotMessagesToThisRank) {
  TokenBucket budget(1000, 0, kT0);
  Queue q(SendOrder::kPriority);
  q.push("first", 0, 1000, true, kT0);
  ASSERT_TRUE(q.pop(0, 0, budget, kT0));  // charged: about a second of debt (with frame overhead)
  q.push("second", 0, 10, true, kT0);
  q.push("to myself", 5, 10, false, kT0);
  auto self = q.pop(0, 0, budget, kT0);
  ASSERT_TRUE(self);
  EXPECT_EQ(self->item, "to myself");
  EXPECT_FALSE(q.pop(0, 0, budget, kT0 + milliseconds(900)));
  auto later = q.pop(0, 0, budget, kT0 + milliseconds(1100));
  ASSERT_TRUE(later);
  EXPECT_EQ(later->item, "second");
  EXPECT_EQ(later->queued, kT0);
}

TEST(SendQueue, TakeAllReturnsWhatWasLeftInOrder) {
  Queue q(SendOrder::kPriority);
  q.push("b", 2, 10, true, kT0);
  q.push("a", 1, 10, true, kT0);
  auto all = q.takeAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].item, "a");
  EXPECT_EQ(all[1].item, "b");
  EXPECT_TRUE(q.empty());
}

TEST(SendQueue, TakeIfTakesOnlyTheMatchesAndKeepsTheRestInOrder) {
  // A peer that left: its messages go, the others' stay queued in their order.
  TokenBucket none(0, 0, kT0);
  Queue q(SendOrder::kPriority);
  q.push("to 1: layer 2", 2, 10, true, kT0);
  q.push("to 2: layer 1", 1, 10, true, kT0);
  q.push("to 1: layer 0", 0, 10, true, kT0);
  q.push("to 2: layer 3", 3, 10, true, kT0);
  const auto toOne = [](const std::string& m) { return m.rfind("to 1", 0) == 0; };
  EXPECT_TRUE(q.any(toOne));
  const auto taken = q.takeIf(toOne);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].item, "to 1: layer 0");
  EXPECT_EQ(taken[1].item, "to 1: layer 2");
  EXPECT_FALSE(q.any(toOne));
  EXPECT_EQ(drain(q, none), (std::vector<std::string>{"to 2: layer 1", "to 2: layer 3"}));
}

TEST(SendPolicy, ParsesTheOrderOrSaysWhatItTakes) {
  EXPECT_EQ(parseSendOrder("priority"), SendOrder::kPriority);
  EXPECT_EQ(parseSendOrder("fifo"), SendOrder::kFifo);
  try {
    parseSendOrder("lifo");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'priority' or 'fifo'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace poseidon
