#include "comm/control_channel.h"

#include <gtest/gtest.h>

#include <chrono>

#include "poseidon/errors.h"
#include "test_ranks.h"

namespace poseidon {
namespace {

using std::chrono::milliseconds;

// Stops the transport before the channel it delivers to goes out of scope.
struct StopOnExit {
  Transport& t;
  ~StopOnExit() { t.stop(); }
};

void startControl(Transport& t, ControlChannel& c, FailureState& f) {
  t.start(TransportCallbacks{[&c](Message m) { c.onMessage(std::move(m)); }, [&f](std::exception_ptr e) { f.set(e); }});
}

// One rank's channel over a started transport; members go in reverse: the transport stops
// before the channel it delivers to.
struct ControlRank {
  ControlRank(Transport& t, milliseconds timeout) : channel(t, timeout, failure), guard{t} {
    startControl(t, channel, failure);
  }
  FailureState failure;
  ControlChannel channel;
  StopOnExit guard;
};

TEST(ControlChannel, AllgatherBroadcastAndAllreduceAgreeOnEveryRank) {
  testing::runRanks(4, [](Transport& t, int rank) {
    ControlRank me(t, milliseconds(10000));
    ControlChannel& c = me.channel;
    auto all = c.allgather(std::string(rank + 1, 'a' + rank), "test");
    ASSERT_EQ(all.size(), 4u);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(all[r], std::string(r + 1, 'a' + r));
    EXPECT_EQ(c.broadcast(rank == 2 ? "from two" : "", 2, "test"), "from two");
    // Larger than one control chunk, so it is sent in pieces.
    std::vector<float> v(ControlChannel::kMaxChunkBytes / 4 + 1000, rank == 0 ? 1.5f : 0.0f);
    c.broadcastFloats(v.data(), v.size(), 0, "test");
    EXPECT_EQ(v.back(), 1.5f);
    auto sum = c.allreduceSum({1.0, static_cast<double>(rank)}, "test");
    EXPECT_EQ(sum[0], 4.0);
    EXPECT_EQ(sum[1], 6.0);
    c.barrier("end");
  });
}

// An empty vector has no data() to copy (memcpy from null is undefined even for 0 bytes):
// its sum is empty on every rank, and the channel goes on in step.
TEST(ControlChannel, AllreduceOfNothingIsEmpty) {
  testing::runRanks(3, [](Transport& t, int rank) {
    ControlRank me(t, milliseconds(10000));
    ControlChannel& c = me.channel;
    EXPECT_TRUE(c.allreduceSum({}, "nothing").empty());
    EXPECT_EQ(c.allreduceSum({static_cast<double>(rank)}, "after")[0], 3.0);
  });
}

TEST(ControlChannel, AMissingRankIsATimeoutNamingIt) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(testing::runRanks(3,
                                 [](Transport& t, int rank) {
                                   ControlRank me(t, milliseconds(300));
                                   if (rank == 1) return;  // this rank never takes part
                                   me.channel.barrier("test barrier");
                                 }),
               TimeoutError);
  // Within about twice the timeout, never a hang.
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

}  // namespace
}  // namespace poseidon
