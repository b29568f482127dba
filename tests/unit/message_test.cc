#include "comm/message.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "comm/error_feedback.h"
#include "comm/factors.h"
#include "comm/gradient16.h"
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

// A 16-bit push (comm/gradient16.h) survives the wire's decoding, unpacks to what
// roundThrough gives the sender's own shard, and refuses a wrong length or format.
TEST(Message, SixteenBitGradientsRoundTripAndRefuseMalformedPayloads) {
  std::vector<float> grad = {1.0f, -3.14159f, 1e-3f, 65504.0f * 4, 0.0f, 7.5e-6f, -2.5f};
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    Message m = packHalf(MsgType::kPushGrad16, f, 9, 1, 4, grad.data(), grad.size());
    EXPECT_EQ(m.type(), MsgType::kPushGrad16);
    EXPECT_EQ(m.pair(), 9u);
    EXPECT_EQ(m.payloadBytes(), 8 + 2 * grad.size());
    Message d = Message::decode(copyOf(m, m.wireBytes()), m.wireBytes(), 1 << 20);
    std::vector<float> out(grad.size()), rounded(grad.size());
    unpackHalf(d, out.data(), out.size());
    roundThrough(f, grad.data(), rounded.data(), grad.size());
    EXPECT_EQ(out, rounded);
    // bf16 keeps 8 bits of each value; fp16 11, down to its smallest step under the scale
    // that the largest value (262016) sets: 2^-25 / 2^-4.
    for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(out[i], grad[i], std::abs(grad[i]) / 128 + 1e-6) << i;
    EXPECT_THROW(unpackHalf(d, out.data(), out.size() - 1), CommError);  // another pair's length
    auto bad = copyOf(m, m.wireBytes());
    bad[sizeof(MessageHeader)] = 7;  // format
    EXPECT_THROW(unpackHalf(Message::decode(std::move(bad), m.wireBytes(), 1 << 20), out.data(), out.size()),
                 CommError);
  }
}

// SFB's factors in 16 bits (comm/factors.h): U and V each with their own fp16 scale, so
// V's activations do not flush U's small output gradients; each decodes to what rounding
// it alone gives; a message of the other width, a bad size or format is refused.
TEST(Message, SixteenBitFactorsKeepAScaleEachAndRefuseAnotherWidth) {
  const std::int64_t K = 2, M = 3, N = 4;
  const std::vector<float> U = {1e-6f, -2e-6f, 3e-7f, 4e-6f, -5e-7f, 6e-6f};                  // K x M
  const std::vector<float> V = {100.0f, -250.0f, 3.5f, 0.0f, 1000.0f, 7.0f, -8.0f, 9.25f};  // K x N
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    Message m = packFactors16(f, 5, 1, 3, U.data(), V.data(), K, M, N);
    EXPECT_EQ(m.type(), MsgType::kFactors16);
    EXPECT_EQ(m.layer(), 5u);
    EXPECT_EQ(m.payloadBytes(), static_cast<std::size_t>(12 + 2 * K * (M + N)));
    Message d = Message::decode(copyOf(m, m.wireBytes()), m.wireBytes(), 1 << 20);
    EXPECT_EQ(factorRows(d, f, M, N), K);
    std::vector<float> u(U.size()), v(V.size()), ru(U.size()), rv(V.size());
    unpackFactors(d, f, M, N, u.data(), v.data());
    roundThrough(f, U.data(), ru.data(), U.size());
    roundThrough(f, V.data(), rv.data(), V.size());
    EXPECT_EQ(u, ru);
    EXPECT_EQ(v, rv);
    for (std::size_t i = 0; i < U.size(); ++i) EXPECT_NEAR(u[i], U[i], std::abs(U[i]) / 128) << i;
    EXPECT_THROW(factorRows(d, f, M + 1, N), CommError);                 // no whole rows
    EXPECT_THROW(factorRows(d, WireFormat::kFp32, M, N), CommError);     // this run sends fp32
    const WireFormat other = f == WireFormat::kBf16 ? WireFormat::kFp16 : WireFormat::kBf16;
    EXPECT_THROW(factorRows(d, other, M, N), CommError);                 // the other 16-bit format
  }
  const Message fp32 = packFactors(MsgType::kFactors, 5, 1, 3, U.data(), V.data(), K, M, N);
  EXPECT_EQ(factorRows(fp32, WireFormat::kFp32, M, N), K);
  EXPECT_THROW(factorRows(fp32, WireFormat::kBf16, M, N), CommError);
}

// packHalfReading (a shard's update, an error-feedback push) writes the message packHalf
// would and hands every value's decoding, chunk by chunk, in order, over pairs longer
// than one chunk.
TEST(Message, PackingWhileReadingGivesPackHalfsMessageAndItsDecoding) {
  std::vector<float> values(10000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * i) * (i % 7 == 0 ? 1e3f : 1e-3f);
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16}) {
    std::vector<float> read(values.size(), -1.0f), unpacked(values.size());
    std::size_t next = 0;
    Message m = packHalfReading(MsgType::kParams16, f, 3, 0, 2, values.data(), values.size(),
                                [&](std::size_t from, const float* chunk, std::size_t n) {
                                  EXPECT_EQ(from, next);
                                  std::copy(chunk, chunk + n, read.begin() + from);
                                  next = from + n;
                                });
    EXPECT_EQ(next, values.size());
    Message plain = packHalf(MsgType::kParams16, f, 3, 0, 2, values.data(), values.size());
    ASSERT_EQ(m.payloadBytes(), plain.payloadBytes());
    EXPECT_EQ(0, std::memcmp(m.payload(), plain.payload(), m.payloadBytes()));
    unpackHalf(m, unpacked.data(), unpacked.size());
    EXPECT_EQ(read, unpacked);
    // In place, as a shard packs its update: the callback overwrites what was just packed
    // (with values far larger, which a scale taken after the first chunk would clip).
    std::vector<float> overwritten = values;
    Message aliased = packHalfReading(MsgType::kParams16, f, 3, 0, 2, overwritten.data(), overwritten.size(),
                                      [&](std::size_t from, const float*, std::size_t n) {
                                        std::fill(overwritten.begin() + from, overwritten.begin() + from + n, 1e9f);
                                      });
    EXPECT_EQ(0, std::memcmp(aliased.payload(), plain.payload(), plain.payloadBytes())) << wireFormatName(f);
  }
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

// Error feedback (comm/error_feedback.h): what bf16 loses of a value comes with the next,
// so the sum of what arrives tracks the sum sent; an overflow leaves no residual behind.
TEST(Residual, CarriesWhatRoundingLostAndDropsWhatOverflowed) {
  Residual r(2);
  const float x[2] = {1.0f + 1.0f / 512, 3.0f};  // 1 + 2^-9 rounds to 1 in bf16
  float read[2];
  double sent = 0, arrived = 0;
  for (int step = 0; step < 4; ++step) {
    roundThrough(WireFormat::kBf16, r.carry(x), read, 2);
    r.keep(read);
    sent += x[0];
    arrived += read[0];
  }
  EXPECT_EQ(arrived, sent);  // 4 x (1 + 2^-9) = 4 + 2^-7: the last step carries what the others lost
  EXPECT_EQ(r.data()[1], 0.0f);
  const float overflow[2] = {INFINITY, std::nanf("")};
  roundThrough(WireFormat::kBf16, r.carry(overflow), read, 2);
  r.keep(read);
  EXPECT_EQ(r.data()[0], 0.0f);
  EXPECT_EQ(r.data()[1], 0.0f);
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
