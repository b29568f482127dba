#include "node/pieces.h"

#include <algorithm>
#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

void gatherInto(const FloatSpans& spans, float* out) {
  for (const auto& s : spans) {
    std::memcpy(out, s.first, s.second * sizeof(float));
    out += s.second;
  }
}

void scatterFrom(const float* src, const FloatTargets& outs, bool add) {
  for (const auto& o : outs) {
    if (add) {
      for (std::size_t i = 0; i < o.second; ++i) o.first[i] += src[i];
    } else {
      std::memcpy(o.first, src, o.second * sizeof(float));
    }
    src += o.second;
  }
}

std::vector<Message> cutIntoPieces(MsgType type, int layer, int source, std::uint64_t iteration,
                                   const FloatSpans& spans, std::size_t piece_floats) {
  std::size_t total = 0;
  for (const auto& s : spans) total += s.second;
  // Pieces grow past the KV pair's size where a huge layer would need more than the key's
  // 15 bits can number (a small --kv-pair-bytes): the receiver does not need their size.
  piece_floats = std::max<std::size_t>({piece_floats, 1, (total + 0x7ffe) / 0x7fff});
  const std::size_t count = std::max<std::size_t>(1, (total + piece_floats - 1) / piece_floats);
  if (layer < 0 || layer > 0xffff) {
    throw Error(detail::cat("layer ", layer, ": past the 65535 layers a node's messages can name"));
  }
  std::vector<Message> out;
  std::size_t span = 0, at = 0;  // position in spans
  for (std::size_t p = 0; p < count; ++p) {
    const std::size_t n = std::min(piece_floats, total - p * piece_floats);
    const std::uint32_t key =
        static_cast<std::uint32_t>(layer) | static_cast<std::uint32_t>(p) << 16 | (p + 1 == count ? 1u << 31 : 0u);
    Message m = Message::make(type, key, static_cast<std::uint32_t>(source), iteration, n * sizeof(float));
    float* dst = m.floats();
    for (std::size_t left = n; left > 0;) {
      while (at == spans[span].second) ++span, at = 0;  // past a span's end, or an empty tensor
      const std::size_t take = std::min(left, spans[span].second - at);
      std::memcpy(dst, spans[span].first + at, take * sizeof(float));
      dst += take, left -= take, at += take;
    }
    out.push_back(std::move(m.setPriority(layer)));
  }
  return out;
}

void PieceAssembly::add(Message piece) {
  const auto& h = piece.header();
  const PieceKey key = PieceKey::of(h.key);
  if (pieces_.empty() && received_ == 0) {
    iteration_ = h.iteration;
    type_ = piece.type();
  }
  if (h.iteration != iteration_ || piece.type() != type_) {
    throw CommError(detail::cat("rank ", h.source, " sent a piece of layer ", key.layer, " of iteration ", h.iteration,
                                " while that of iteration ", iteration_, " is still being gathered"));
  }
  if (static_cast<std::size_t>(key.index) >= pieces_.size()) pieces_.resize(key.index + 1);
  if (!pieces_[key.index].empty() || (total_ > 0 && key.index >= total_)) {
    throw CommError(detail::cat("rank ", h.source, " sent piece ", key.index, " of layer ", key.layer, " twice"));
  }
  if (key.last) {
    if (pieces_.size() > static_cast<std::size_t>(key.index) + 1) {
      throw CommError(
          detail::cat("rank ", h.source, " sent a piece of layer ", key.layer, " past its last (", key.index, ")"));
    }
    total_ = key.index + 1;
  }
  pieces_[key.index] = std::move(piece);
  ++received_;
}

std::size_t PieceAssembly::floats() const {
  std::size_t n = 0;
  for (const auto& p : pieces_) n += p.floatCount();
  return n;
}

void PieceAssembly::takeInto(float* out) {
  for (auto& p : pieces_) {
    std::memcpy(out, p.floats(), p.floatCount() * sizeof(float));
    out += p.floatCount();
  }
  *this = PieceAssembly();
}

void PieceAssembly::scatterInto(const FloatTargets& outs, bool add) const {
  std::size_t room = 0;
  for (const auto& o : outs) room += o.second;
  POSEIDON_ENFORCE_EQ(room, floats(), "floats to scatter");
  std::size_t out = 0, at = 0;  // position in outs
  for (const auto& p : pieces_) {
    const float* src = p.floats();
    for (std::size_t left = p.floatCount(); left > 0;) {
      while (at == outs[out].second) ++out, at = 0;  // past a target's end, or an empty one
      const std::size_t n = std::min(left, outs[out].second - at);
      float* dst = outs[out].first + at;
      if (add) {
        for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
      } else {
        std::memcpy(dst, src, n * sizeof(float));
      }
      src += n, left -= n, at += n;
    }
  }
}

std::vector<float> PieceAssembly::take() {
  std::vector<float> out(floats());
  takeInto(out.data());
  return out;
}

}  // namespace poseidon
