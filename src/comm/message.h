// Message framing. Every message carries a fixed 32-byte header (magic, version, type,
// key, source, iteration, payload length) in front of its payload, so that a receiver can
// reject truncated or foreign bytes before it trusts any length in them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace poseidon {

enum class MsgType : std::uint16_t {
  kControl = 1,            // collectives used at start-up and between epochs
  kPushGrad = 2,           // worker -> shard: gradient of one KV pair
  kParams = 3,             // shard -> worker: fresh parameters of one KV pair
  kFactors = 4,            // worker -> worker: sufficient factors (U, V) of one FC layer
  kPushFactors = 5,        // worker -> shard: factors of one FC layer (the 2015 paper's strategy)
  kNodeGrad = 6,           // device -> its node's leader: one layer's gradient, all tensors
  kNodeFactors = 7,        // device -> its node's leader: one FC layer's factors (U, V)
  kNodeParams = 8,         // leader -> a device of its node: one layer's fresh values (or mean gradient)
  kNodeGradShared = 9,     // as kNodeGrad, but the gradient is in the node's shared memory
  kNodeParamsShared = 10,  // as kNodeParams, but the values are in the node's shared memory
  kPushGrad16 = 11,        // as kPushGrad, in 16 bits (comm/gradient16.h)
  kParams16 = 12,          // shard -> worker: a KV pair's update (new values minus old) in 16 bits
  kMeanGrad16 = 13,        // shard -> worker, gradient mode: a KV pair's mean gradient in 16 bits
  kFactors16 = 14,         // as kFactors, in 16 bits (comm/factors.h)
  kWhere = 15,             // a rank whose sync timed out asks how far a peer's loop got (client/progress_probe.h)
  kHere = 16,              // the answer: the iterations its loop has ended (header's iteration), whether it waits in a sync (1 byte)
  kMomentumAsk = 17,       // optimizer.state_dict() on a server-mode rank asks every rank for the momentum it holds
  kMomentum = 18,          // one piece of the answer (client/momentum_gather.h); header's iteration: the answer's pieces
  kUseAsk = 19,            // a rank that did not use some layer asks which layers a peer used in an iteration (client/layer_use.h)
  kUse = 20,               // the answer: a byte per layer, 1 if used (header's iteration: the iteration)
  kRows = 21,              // worker -> worker: the rows one layer's gradient touched and their indices (sparse/)
  kLastType = kRows,
};

// What a header's key names, by the message's type: a KV pair of the information book
// (kPushGrad, kPushGrad16, kParams, kParams16, kMeanGrad16), a layer (kFactors, kFactors16, kPushFactors, kRows), a piece of a layer (the kNode*
// types: node/pieces.h's PieceKey), or a control message's or a question's sequence number
// (kControl, kWhere, kHere, kMomentumAsk, kMomentum, kUseAsk, kUse).
enum class KeyKind { kPair, kLayer, kPiece, kSequence };
KeyKind keyKind(MsgType type);

// The progress probe's few bytes pass the bandwidth manager's window and budget, as a
// message to the same node does: sends to a stopped peer, never completed, may hold the
// window full, and the question is asked exactly then. So do the layer-use questions,
// which an iteration's end waits for.
inline bool skipsSendWindow(MsgType type) {
  return type == MsgType::kWhere || type == MsgType::kHere || type == MsgType::kUseAsk || type == MsgType::kUse;
}

// Largest payload a received header may announce (the transports Runtime makes): KV pairs
// are capped well below this, broadcasts of tensors and of a JobChannel's strings are
// chunked to ControlChannel::kMaxChunkBytes, a layer's sparse rows are planned only for
// tables whose whole gradient fits (scheme_planner); the other control messages are small.
inline constexpr std::size_t kMaxPayloadBytes = 256u << 20;

struct MessageHeader {
  static constexpr std::uint32_t kMagic = 0x4e445350;  // "PSDN"
  // 2: kMeanGrad16, and large external payloads sent apart from their header (MpiTransport).
  // 3: kFactors16. 4: kWhere, kHere. 5: kHere's byte (waits in a sync). 6: kMomentumAsk, kMomentum, kUseAsk, kUse.
  // 7: kRows.
  static constexpr std::uint16_t kVersion = 7;

  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::uint16_t type = 0;
  std::uint32_t key = 0;     // a pair, layer, piece or sequence number: keyKind(type)
  std::uint32_t source = 0;  // sender rank
  std::uint64_t iteration = 0;
  std::uint64_t payload_bytes = 0;
};
static_assert(sizeof(MessageHeader) == 32, "the wire header is 32 bytes");

// A header's magic, version, type and payload length (at most `max_payload_bytes`), before
// anything trusts it; CommError naming what is wrong.
void checkHeader(const MessageHeader& h, std::size_t max_payload_bytes);

// A header plus payload. Usually one contiguous buffer; a message made with makeExternal
// instead points at a payload it borrows (engine or shard memory, sent without a copy),
// which must stay unchanged until every send of it has completed, and which the message
// keeps alive through its owner for as long as any copy of it exists (a transport that
// gives up on a send keeps the copy, and so the memory, as long as MPI may read it).
// Copies share the buffer: a message is immutable once handed to a transport, so it can
// go to many peers.
class Message {
 public:
  Message() = default;
  // A message with an uninitialised payload of `payload_bytes` for the caller to fill.
  static Message make(MsgType type, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                      std::size_t payload_bytes);
  // A message whose payload stays where it is, at `payload`, kept alive by `owner` (null
  // only where the memory outlives every transport, e.g. a test's stack frame that
  // outlives its loopback transport).
  static Message makeExternal(MsgType type, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                              const void* payload, std::size_t payload_bytes, std::shared_ptr<const void> owner);
  // Validates raw bytes received from the wire: magic, version, known type, and a payload
  // length that matches the byte count and stays under `max_payload_bytes`.
  // Throws CommError naming what is wrong.
  static Message decode(std::unique_ptr<std::uint8_t[]> bytes, std::size_t size, std::size_t max_payload_bytes);

  bool empty() const { return data_ == nullptr; }
  const MessageHeader& header() const { return *reinterpret_cast<const MessageHeader*>(data_.get()); }
  MsgType type() const { return static_cast<MsgType>(header().type); }
  // The header's key as the KV pair or the layer it names; fails where keyKind(type())
  // says it names something else.
  std::uint32_t pair() const;
  std::uint32_t layer() const;
  std::uint8_t* payload() { return external_ ? external_ : data_.get() + sizeof(MessageHeader); }
  const std::uint8_t* payload() const { return external_ ? external_ : data_.get() + sizeof(MessageHeader); }
  std::size_t payloadBytes() const { return size_ - sizeof(MessageHeader); }
  float* floats() { return reinterpret_cast<float*>(payload()); }
  const float* floats() const { return reinterpret_cast<const float*>(payload()); }
  std::size_t floatCount() const { return payloadBytes() / sizeof(float); }

  // Header and payload are one buffer (wire() is all of it) unless made with makeExternal.
  bool contiguous() const { return external_ == nullptr; }
  const std::uint8_t* headerBytes() const { return data_.get(); }
  const std::uint8_t* wire() const { return data_.get(); }
  std::size_t wireBytes() const { return size_; }
  // The same message in one buffer (a copy when external).
  Message toContiguous() const;

  // How soon the receiver needs it, for the bandwidth manager's order (lower goes first;
  // never on the wire): the layer's index for a layer's traffic, since the next forward
  // pass needs the lower layers first; kUrgent for everything else (control messages).
  static constexpr int kUrgent = -1;
  int priority() const { return priority_; }
  Message& setPriority(int priority) {
    priority_ = priority;
    return *this;
  }

 private:
  std::shared_ptr<std::uint8_t[]> data_;  // header, and the payload when contiguous
  std::uint8_t* external_ = nullptr;
  std::shared_ptr<const void> owner_;  // keeps external_ valid
  std::size_t size_ = 0;  // header + payload
  int priority_ = kUrgent;
};

}  // namespace poseidon
