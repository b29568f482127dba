#include "comm/message.h"

#include <gtest/gtest.h>

#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {
namespace {

std::unique_ptr<std::uint8_t[]> copyOf(const Message& m, std::size_t size) {
  std::unique_ptr<std::uint8_t[]> b(new std::uint8_t[size]());
  std::memcpy(b.get(), m.wire(), std::min(size, m.wireBytes()));
  return b;
}

TEST(Message, RoundTripsHeaderAndPayload) {
  Message m = Message::make(MsgType::kPushGrad, 17, 3, 42, 3 * sizeof(float));
  m.floats()[0] = 1.5f;
  m.floats()[1] = -2.0f;
  m.floats()[2] = 3.25f;
  Message d = Message::decode(copyOf(m, m.wireBytes()), m.wireBytes(), 1 << 20);
  EXPECT_EQ(d.type(), MsgType::kPushGrad);
  EXPECT_EQ(d.header().key, 17u);
  EXPECT_EQ(d.header().source, 3u);
  EXPECT_EQ(d.header().iteration, 42u);
  ASSERT_EQ(d.floatCount(), 3u);
  EXPECT_EQ(d.floats()[2], 3.25f);
}

TEST(Message, KeyNamesAPairOrALayerByType) {
  EXPECT_EQ(Message::make(MsgType::kParams, 5, 0, 0, 0).pair(), 5u);
  EXPECT_EQ(Message::make(MsgType::kFactors, 2, 0, 0, 0).layer(), 2u);
  EXPECT_EQ(keyKind(MsgType::kNodeGrad), KeyKind::kPiece);
  EXPECT_EQ(keyKind(MsgType::kControl), KeyKind::kSequence);
  // A layer read as a pair (or the other way round) would find another tensor's values.
  EXPECT_THROW(Message::make(MsgType::kFactors, 2, 0, 0, 0).pair(), Error);
  EXPECT_THROW(Message::make(MsgType::kPushGrad, 2, 0, 0, 0).layer(), Error);
}

TEST(Message, CopiesShareOneBuffer) {
  Message m = Message::make(MsgType::kParams, 1, 0, 0, 8);
  Message copy = m;
  EXPECT_EQ(copy.wire(), m.wire());
}

TEST(Message, RejectsTruncatedHeader) {
  Message m = Message::make(MsgType::kControl, 0, 0, 0, 0);
  EXPECT_THROW(Message::decode(copyOf(m, 10), 10, 1 << 20), CommError);
}

TEST(Message, RejectsForeignBytes) {
  Message m = Message::make(MsgType::kControl, 0, 0, 0, 4);
  auto bytes = copyOf(m, m.wireBytes());
  bytes[0] ^= 0xff;
  EXPECT_THROW(Message::decode(std::move(bytes), m.wireBytes(), 1 << 20), CommError);
}

TEST(Message, RejectsOtherVersionAndUnknownType) {
  Message m = Message::make(MsgType::kControl, 0, 0, 0, 4);
  auto v = copyOf(m, m.wireBytes());
  v[4] = 99;  // version
  EXPECT_THROW(Message::decode(std::move(v), m.wireBytes(), 1 << 20), CommError);
  auto t = copyOf(m, m.wireBytes());
  t[6] = 77;  // type
  EXPECT_THROW(Message::decode(std::move(t), m.wireBytes(), 1 << 20), CommError);
}

TEST(Message, RejectsLengthThatDisagreesWithBytes) {
  Message m = Message::make(MsgType::kParams, 0, 0, 0, 64);
  // Truncated payload: the header announces 64 bytes, only 32 arrived.
  EXPECT_THROW(Message::decode(copyOf(m, 32 + 32), 32 + 32, 1 << 20), CommError);
  // Over the receiver's limit.
  EXPECT_THROW(Message::decode(copyOf(m, m.wireBytes()), m.wireBytes(), 16), CommError);
}

}  // namespace
}  // namespace poseidon
