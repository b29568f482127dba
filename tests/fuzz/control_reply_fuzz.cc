// The control channel's replies, as a non-root rank receives them from the root: the
// packed allgather reply (n u64 lengths, then the strings) and what allreduceSum,
// broadcastFloats and broadcast make of their reply. The input is
//   byte 0: the call (0 allgather, 1 allreduceSum, 2 broadcastFloats, 3 broadcast);
//   byte 1: the job's rank count (2..17);
//   byte 2: the doubles or floats this rank holds (1..32: callers never pass none);
//   the rest: the reply's payload.
// The reply is delivered before the call, under the call's sequence number and the root's
// rank, so the call finds it at once and parses it without waiting.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "allreduce/communicator.h"
#include "comm/control_channel.h"
#include "fuzz_target.h"

namespace {

using namespace poseidon;

// Rank 1 of `ranks`; what it sends goes nowhere, since the reply is already delivered.
class SilentTransport final : public Transport {
 public:
  explicit SilentTransport(int ranks) : ranks_(ranks) {}
  int rank() const override { return 1; }
  int size() const override { return ranks_; }
  void start(TransportCallbacks) override {}
  std::shared_ptr<Work> send(int, Message) override {
    auto done = std::make_shared<Work>("fuzz send");
    done->markDone();
    return done;
  }
  CollectiveChannel newCollectiveChannel(const std::vector<int>*, std::chrono::milliseconds) override { return {}; }
  void stop() override {}

 private:
  const int ranks_;
};

Message reply(const std::uint8_t* payload, std::size_t bytes) {
  // Sequence number 0 (the channel's first call), from rank 0 (the root).
  Message m = Message::make(MsgType::kControl, 0, 0, 0, bytes);
  if (bytes) std::memcpy(m.payload(), payload, bytes);
  return m;
}

void call(ControlChannel& channel, int which, std::size_t count) {
  if (which == 0) {
    for (const auto& s : channel.allgather("mine", "fuzz")) (void)s.size();
  } else if (which == 1) {
    (void)channel.allreduceSum(std::vector<double>(count, 1.0), "fuzz");
  } else if (which == 2) {
    std::vector<float> floats(count);
    channel.broadcastFloats(floats.data(), floats.size(), 0, "fuzz");
  } else {
    (void)channel.broadcast("mine", 0, "fuzz");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  return fuzz::parseOrRefuse([&] {
    SilentTransport transport(2 + data[1] % 16);
    FailureState failure;
    // The reply is there before the call, so the deadline is never reached.
    ControlChannel channel(transport, std::chrono::milliseconds(1000), failure);
    channel.onMessage(reply(data + 3, size - 3));
    call(channel, data[0] % 4, 1 + data[2] % 32);
  });
}
