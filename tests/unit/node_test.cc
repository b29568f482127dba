// The devices level's parts without MPI: which ranks form a node, a layer cut into pieces
// and put back together in any arrival order, and the plan of a cluster of nodes against
// hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "comm/control_channel.h"
#include "coordinator/scheme_planner.h"
#include "coordinator/node_map.h"
#include "node/node_memory.h"
#include "node/pieces.h"
#include "poseidon/errors.h"
#include "test_ranks.h"

namespace poseidon {
namespace {

TEST(NodeMapTest, BlocksOfConsecutiveRanks) {
  const NodeMap m = NodeMap::blocks(6, 3);
  EXPECT_EQ(m.nodes(), 2);
  EXPECT_TRUE(m.hierarchical());
  EXPECT_EQ(m.nodeOf(4), 1);
  EXPECT_EQ(m.leader(1), 3);
  EXPECT_TRUE(m.isLeader(3));
  EXPECT_FALSE(m.isLeader(4));
  EXPECT_EQ(m.devicesBesideLeader(1), (std::vector<int>{4, 5}));
  EXPECT_TRUE(m.sameNode(3, 5));
  EXPECT_FALSE(m.sameNode(2, 3));
  EXPECT_FALSE(NodeMap::flat(4).hierarchical());
  EXPECT_THROW(NodeMap::blocks(4, 3), InputError);
}

TEST(NodeMapTest, FromHostNames) {
  const NodeMap m = NodeMap::fromKeys({"a", "a", "b", "b"});
  EXPECT_EQ(m.nodes(), 2);
  EXPECT_EQ(m.devicesPerNode(), 2);
  EXPECT_EQ(NodeMap::fromKeys({"a", "b", "c"}).devicesPerNode(), 1);
  EXPECT_EQ(NodeMap::fromKeys({"a", "a", "a"}).nodes(), 1);
  EXPECT_THROW(NodeMap::fromKeys({"a", "b", "a", "b"}), InputError);  // not consecutive
  EXPECT_THROW(NodeMap::fromKeys({"a", "a", "b"}), InputError);       // uneven
  EXPECT_THROW(NodeMap::fromKeys({"a", "a", "b", "b", "a", "a"}), InputError);
}

TEST(PiecesTest, CutAndReassembledInAnyOrder) {
  std::vector<float> w(1000), empty, b(7);
  std::iota(w.begin(), w.end(), 0.0f);
  std::iota(b.begin(), b.end(), 5000.0f);
  const FloatSpans spans{{w.data(), w.size()}, {empty.data(), 0}, {b.data(), b.size()}};
  auto pieces = cutIntoPieces(MsgType::kNodeGrad, 12, 3, 9, spans, 64);
  ASSERT_EQ(pieces.size(), 16u);  // 1007 floats in pieces of 64
  EXPECT_EQ(PieceKey::of(pieces.back().header().key).layer, 12);
  EXPECT_TRUE(PieceKey::of(pieces.back().header().key).last);
  std::shuffle(pieces.begin(), pieces.end(), std::mt19937(1));
  PieceAssembly a;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_FALSE(a.complete());
    a.add(pieces[i]);
  }
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.iteration(), 9u);
  const auto values = a.take();
  ASSERT_EQ(values.size(), 1007u);
  EXPECT_EQ(values[999], 999.0f);
  EXPECT_EQ(values[1000], 5000.0f);
  EXPECT_EQ(values[1006], 5006.0f);
  EXPECT_TRUE(a.empty());
}

TEST(PiecesTest, RefusesDuplicatesAndOtherIterations) {
  std::vector<float> w(100, 1.0f);
  const auto pieces = cutIntoPieces(MsgType::kNodeGrad, 0, 1, 4, {{w.data(), w.size()}}, 40);
  PieceAssembly a;
  a.add(pieces[0]);
  EXPECT_THROW(a.add(pieces[0]), CommError);
  const auto later = cutIntoPieces(MsgType::kNodeGrad, 0, 1, 5, {{w.data(), w.size()}}, 40);
  EXPECT_THROW(a.add(later[1]), CommError);
  // Nothing to send still makes one (empty, last) piece, so the receiver hears of it.
  const auto none = cutIntoPieces(MsgType::kNodeFactors, 2, 1, 0, {}, 40);
  ASSERT_EQ(none.size(), 1u);
  PieceAssembly b;
  b.add(none[0]);
  EXPECT_TRUE(b.complete());
  EXPECT_EQ(b.floats(), 0u);
}

TEST(PiecesTest, HugeLayersGetLargerPiecesNotAnError) {
  // 70000 floats in pieces of 1 would need 70000 pieces; the key numbers 32767 at most.
  std::vector<float> w(70000);
  std::iota(w.begin(), w.end(), 0.0f);
  auto pieces = cutIntoPieces(MsgType::kNodeGrad, 1, 1, 0, {{w.data(), w.size()}}, 1);
  EXPECT_LE(pieces.size(), 0x7fffu);
  PieceAssembly a;
  for (auto& p : pieces) a.add(std::move(p));
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.take(), w);
}

TEST(PiecesTest, RefusesAPiecePastTheLast) {
  std::vector<float> w(100, 1.0f);
  const auto three = cutIntoPieces(MsgType::kNodeGrad, 0, 1, 4, {{w.data(), w.size()}}, 40);
  const auto two = cutIntoPieces(MsgType::kNodeGrad, 0, 1, 4, {{w.data(), 80}}, 40);
  PieceAssembly a;
  a.add(three[2]);                         // index 2 (a last one, of three)
  EXPECT_THROW(a.add(two[1]), CommError);  // index 1 says it is the last: 2 lies past it
}

ModelInfo oneFc(std::int64_t M, std::int64_t N) {
  ModelInfo m;
  m.name = "fc";
  LayerInfo l;
  l.name = "fc";
  l.kind = LayerKind::kFC;
  l.M = M;
  l.N = N;
  l.tensors = {TensorInfo{"weight", {M, N}}};
  m.layers.push_back(l);
  return m;
}

TEST(PlanForNodesTest, HandComputedFigures) {
  // 2 nodes x 4 devices, 32 examples each: K = 128 per node, P1 = P2 = 2.
  PlanRequest req;
  req.batch = 32;
  const auto nodes = planForNodes(oneFc(4096, 4096), 2, 4, req);
  EXPECT_DOUBLE_EQ(nodes[0].sfb_floats, 2.0 * 128 * 1 * 8192);      // 2 K (P1 - 1)(M + N)
  EXPECT_DOUBLE_EQ(nodes[0].ps_floats, 2.0 * 4096 * 4096 * 2 / 2);  // 2 M N (P1 + P2 - 2) / P2
  EXPECT_EQ(nodes[0].scheme, Scheme::kSFB);
  // The same 8 devices flat: K = 32, P1 = P2 = 8.
  const auto flat = planSchemes(oneFc(4096, 4096), ClusterInfo(8, 0, 0), req);
  EXPECT_DOUBLE_EQ(flat[0].sfb_floats, 2.0 * 32 * 7 * 8192);
  EXPECT_DOUBLE_EQ(flat[0].ps_floats, 2.0 * 4096 * 4096 * 14 / 8);
  // A node's wide batch tips a small layer back to PS: 64 x 64, 2 nodes x 16 devices of 32:
  // K = 512, SFB 2*512*1*128 = 131072 floats > PS 2*64*64 = 8192.
  EXPECT_EQ(planForNodes(oneFc(64, 64), 2, 16, req)[0].scheme, Scheme::kPS);
  EXPECT_THROW(planForNodes(oneFc(64, 64), 0, 2, req), InputError);
}

// Each rank maps the node's segment on its own (here four threads, four mappings): what a
// device writes in its slot the leader reads, and what the leader writes every device reads.
TEST(NodeMemoryTest, DevicesAndLeaderSeeOneSegment) {
  ModelInfo model = oneFc(3, 5);                  // gathered: a slot per device
  model.layers.push_back(oneFc(7, 2).layers[0]);  // factors: values only
  const NodeMap nodes = NodeMap::blocks(4, 2);
  testing::runRanks(4, [&](Transport& t, int rank) {
    FailureState failure;
    ControlChannel control(t, std::chrono::milliseconds(10000), failure);
    t.start(TransportCallbacks{[&control](Message m) { control.onMessage(std::move(m)); },
                               [&failure](std::exception_ptr e) { failure.set(e); }});
    struct StopFirst {  // the transport stops before the channel it delivers to goes
      Transport& t;
      ~StopFirst() { t.stop(); }
    } stop{t};
    {
      auto memory = NodeMemory::open(control, nodes, rank, model, {true, false});
      ASSERT_TRUE(memory);
      EXPECT_EQ(memory->slot(1, 0), nullptr);
      const bool leads = nodes.isLeader(rank);
      const float mark = static_cast<float>(rank + 1);
      if (!leads) std::fill(memory->slot(0, 0), memory->slot(0, 0) + 15, mark);
      if (leads) std::fill(memory->values(1), memory->values(1) + 14, -mark);
      control.barrier("written");
      if (leads) EXPECT_EQ(memory->slot(0, 0)[14], mark + 1);  // its device is the next rank
      if (!leads) EXPECT_EQ(memory->values(1)[13], -mark + 1);
      // The regions do not overlap: the device's slot is intact after the leader's write.
      if (!leads) EXPECT_EQ(memory->slot(0, 0)[0], mark);
      control.barrier("read");
    }
  });
}

}  // namespace
}  // namespace poseidon
