#include "client/momentum_gather.h"

#include <algorithm>
#include <cstring>

#include "comm/transport.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr std::size_t kPieceHeader = 2 * sizeof(std::int32_t) + sizeof(std::int64_t);

}  // namespace

Message encodeMomentumPiece(std::uint32_t question, int source, std::uint64_t pieces, const MomentumPiece* piece) {
  const std::size_t floats = piece ? static_cast<std::size_t>(piece->count) : 0;
  Message m = Message::make(MsgType::kMomentum, question, static_cast<std::uint32_t>(source), pieces,
                            piece ? kPieceHeader + floats * sizeof(float) : 0);
  if (!piece) return m;
  std::uint8_t* at = m.payload();
  const std::int32_t layer = piece->of.layer, tensor = piece->of.tensor;
  const std::int64_t offset = piece->of.offset;
  std::memcpy(at, &layer, sizeof layer);
  std::memcpy(at + 4, &tensor, sizeof tensor);
  std::memcpy(at + 8, &offset, sizeof offset);
  if (floats) std::memcpy(at + kPieceHeader, piece->data, floats * sizeof(float));
  return m;
}

bool decodeMomentumPiece(const Message& m, MomentumValues& out) {
  const std::size_t bytes = m.payloadBytes();
  if (bytes == 0) return false;
  if (bytes < kPieceHeader || (bytes - kPieceHeader) % sizeof(float) != 0) {
    throw CommError(detail::cat("a momentum piece of ", bytes, " bytes from rank ", m.header().source));
  }
  const std::uint8_t* at = m.payload();
  std::int32_t layer = 0, tensor = 0;
  std::int64_t offset = 0;
  std::memcpy(&layer, at, sizeof layer);
  std::memcpy(&tensor, at + 4, sizeof tensor);
  std::memcpy(&offset, at + 8, sizeof offset);
  if (layer < 0 || tensor < 0 || offset < 0) {
    throw CommError(detail::cat("a momentum piece of layer ", layer, ", tensor ", tensor, " from float ", offset));
  }
  out.of = ParamSlice{layer, tensor, offset};
  out.values.resize((bytes - kPieceHeader) / sizeof(float));
  if (!out.values.empty()) std::memcpy(out.values.data(), at + kPieceHeader, out.values.size() * sizeof(float));
  return true;
}

MomentumGather::MomentumGather(Transport& transport, std::function<std::vector<MomentumPiece>()> held)
    : transport_(transport), held_(std::move(held)) {}

void MomentumGather::onMessage(const Message& m) {
  const MessageHeader& h = m.header();
  if (h.source >= static_cast<std::uint32_t>(transport_.size())) {
    throw CommError(detail::cat("a momentum message from rank ", h.source, " of a job of ", transport_.size()));
  }
  if (m.type() == MsgType::kMomentumAsk) {
    answer(h);
    return;
  }
  MomentumValues piece;
  const bool has = decodeMomentumPiece(m, piece);
  std::lock_guard<std::mutex> lock(mu_);
  if (h.key != question_ || expected_.empty() || h.iteration == 0) return;  // a late answer to an older question
  expected_[h.source] = h.iteration;
  ++received_[h.source];
  if (has) pieces_.push_back(std::move(piece));
  cv_.notify_all();
}

void MomentumGather::answer(const MessageHeader& question) {
  const int to = static_cast<int>(question.source), me = transport_.rank();
  try {
    const std::vector<MomentumPiece> pieces = held_();
    if (pieces.empty()) {
      transport_.send(to, encodeMomentumPiece(question.key, me, 1, nullptr));
      return;
    }
    for (const auto& p : pieces) transport_.send(to, encodeMomentumPiece(question.key, me, pieces.size(), &p));
  } catch (const std::exception&) {  // stopping or leaving: the asker hears silence and times out naming this rank
  }
}

std::vector<MomentumValues> MomentumGather::gather(std::chrono::milliseconds limit) {
  const int me = transport_.rank(), n = transport_.size();
  std::uint32_t question = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    question = ++question_;
    expected_.assign(static_cast<std::size_t>(n), 0);
    received_.assign(static_cast<std::size_t>(n), 0);
    expected_[static_cast<std::size_t>(me)] = 1;  // this rank's own pieces are the caller's
    received_[static_cast<std::size_t>(me)] = 1;
    pieces_.clear();
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) transport_.send(r, Message::make(MsgType::kMomentumAsk, question, static_cast<std::uint32_t>(me), 0, 0));
  }
  std::unique_lock<std::mutex> lock(mu_);
  const auto done = [&] {
    for (int r = 0; r < n; ++r) {
      if (expected_[r] == 0 || received_[r] < expected_[r]) return false;
    }
    return true;
  };
  if (!cv_.wait_for(lock, limit, done)) {
    std::string silent;
    for (int r = 0; r < n; ++r) {
      if (expected_[r] == 0 || received_[r] < expected_[r]) silent += detail::cat(silent.empty() ? "" : ", ", r);
    }
    expected_.clear();
    throw TimeoutError(detail::cat("gathering the optimizer's momentum from every rank: no complete answer within ",
                                   limit.count(), " ms from rank ", silent));
  }
  expected_.clear();
  return std::move(pieces_);
}

}  // namespace poseidon
