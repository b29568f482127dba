#include "comm/message.h"

#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

Message Message::make(MsgType type, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                      std::size_t payload_bytes) {
  Message m;
  m.size_ = sizeof(MessageHeader) + payload_bytes;
  // new[] without value-initialisation: payloads are megabytes and are overwritten at once.
  m.data_ = std::shared_ptr<std::uint8_t[]>(new std::uint8_t[m.size_]);
  MessageHeader h;
  h.type = static_cast<std::uint16_t>(type);
  h.key = key;
  h.source = source;
  h.iteration = iteration;
  h.payload_bytes = payload_bytes;
  std::memcpy(m.data_.get(), &h, sizeof(h));
  return m;
}

Message Message::makeExternal(MsgType type, std::uint32_t key, std::uint32_t source, std::uint64_t iteration,
                              const void* payload, std::size_t payload_bytes,
                              std::shared_ptr<const void> owner) {
  Message m = make(type, key, source, iteration, 0);
  reinterpret_cast<MessageHeader*>(m.data_.get())->payload_bytes = payload_bytes;
  m.external_ = static_cast<std::uint8_t*>(const_cast<void*>(payload));
  m.owner_ = std::move(owner);
  m.size_ = sizeof(MessageHeader) + payload_bytes;
  return m;
}

Message Message::toContiguous() const {
  if (contiguous()) return *this;
  const auto& h = header();
  Message m = make(static_cast<MsgType>(h.type), h.key, h.source, h.iteration, payloadBytes());
  std::memcpy(m.payload(), external_, payloadBytes());
  return m;
}

KeyKind keyKind(MsgType type) {
  switch (type) {
    case MsgType::kPushGrad:
    case MsgType::kPushGrad16:
    case MsgType::kParams:
    case MsgType::kParams16:
    case MsgType::kMeanGrad16:
      return KeyKind::kPair;
    case MsgType::kFactors:
    case MsgType::kFactors16:
    case MsgType::kPushFactors:
    case MsgType::kRows:
      return KeyKind::kLayer;
    case MsgType::kControl:
    case MsgType::kWhere:
    case MsgType::kHere:
    case MsgType::kMomentumAsk:
    case MsgType::kMomentum:
    case MsgType::kUseAsk:
    case MsgType::kUse:
      return KeyKind::kSequence;
    case MsgType::kNodeGrad:
    case MsgType::kNodeFactors:
    case MsgType::kNodeParams:
    case MsgType::kNodeGradShared:
    case MsgType::kNodeParamsShared:
      return KeyKind::kPiece;
  }
  throw CommError(detail::cat("no key kind for message type ", static_cast<int>(type)));
}

std::uint32_t Message::pair() const {
  POSEIDON_ENFORCE(keyKind(type()) == KeyKind::kPair, "a message of type ", header().type, " names no KV pair");
  return header().key;
}

std::uint32_t Message::layer() const {
  POSEIDON_ENFORCE(keyKind(type()) == KeyKind::kLayer, "a message of type ", header().type, " names no layer");
  return header().key;
}

Message Message::decode(std::unique_ptr<std::uint8_t[]> bytes, std::size_t size, std::size_t max_payload_bytes) {
  if (size < sizeof(MessageHeader)) {
    throw CommError(detail::cat("received a truncated message: ", size, " bytes, shorter than the 32-byte header"));
  }
  MessageHeader h;
  std::memcpy(&h, bytes.get(), sizeof(h));
  checkHeader(h, max_payload_bytes);
  if (h.payload_bytes != size - sizeof(MessageHeader)) {
    throw CommError(detail::cat("received a message whose header announces ", h.payload_bytes,
                                " payload bytes but carries ", size - sizeof(MessageHeader)));
  }
  Message m;
  m.size_ = size;
  m.data_ = std::shared_ptr<std::uint8_t[]>(bytes.release());
  return m;
}

void checkHeader(const MessageHeader& h, std::size_t max_payload_bytes) {
  if (h.magic != MessageHeader::kMagic) {
    throw CommError("received bytes that are not a Poseidon message (bad magic)");
  }
  if (h.version != MessageHeader::kVersion) {
    throw CommError(detail::cat("received a message of protocol version ", h.version, ", this build speaks version ",
                                MessageHeader::kVersion, "; run the same build on every rank"));
  }
  if (h.type < static_cast<std::uint16_t>(MsgType::kControl) ||
      h.type > static_cast<std::uint16_t>(MsgType::kLastType)) {
    throw CommError(detail::cat("received a message of unknown type ", h.type));
  }
  if (h.payload_bytes > max_payload_bytes) {
    throw CommError(detail::cat("received a message whose header announces ", h.payload_bytes,
                                " payload bytes, over the limit of ", max_payload_bytes));
  }
}

}  // namespace poseidon
