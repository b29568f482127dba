#include "comm/control_channel.h"

#include <algorithm>
#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

ControlChannel::ControlChannel(Transport& transport, std::chrono::milliseconds timeout, const FailureState& failure)
    : transport_(transport), timeout_(timeout), failure_(failure) {}

void ControlChannel::onMessage(Message message) {
  const auto key = std::make_pair(message.header().key, static_cast<int>(message.header().source));
  {
    std::lock_guard<std::mutex> lock(mu_);
    box_[key] = std::move(message);
  }
  cv_.notify_all();
}

Message ControlChannel::waitMessage(std::uint32_t seq, int source, const std::string& what,
                                    std::chrono::milliseconds extra) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_pair(seq, source);
  waitFor(
      lock, cv_, [&] { return box_.count(key) > 0; }, timeout_ + extra, &failure_,
      detail::cat("rank ", transport_.rank(), " waiting for rank ", source, " (", what, ")"));
  Message m = std::move(box_[key]);
  box_.erase(key);
  return m;
}

void ControlChannel::sendTo(int peer, std::uint32_t seq, const void* data, std::size_t bytes) {
  Message m = Message::make(MsgType::kControl, seq, static_cast<std::uint32_t>(transport_.rank()), 0, bytes);
  if (bytes > 0) std::memcpy(m.payload(), data, bytes);
  transport_.send(peer, std::move(m));
}

std::vector<std::string> ControlChannel::allgather(const std::string& mine, const std::string& what) {
  const std::uint32_t seq = next_seq_++;
  const int n = transport_.size();
  const int me = transport_.rank();
  if (me != 0) {
    sendTo(0, seq, mine.data(), mine.size());
    // Rank 0 waits for every rank; when one stalls, rank 0 is the one that knows which,
    // so the others wait a little longer and let its error (naming the rank) end the job.
    Message all = waitMessage(seq, 0, what, replyGrace());
    // Packed as n little-endian u64 lengths followed by the strings.
    std::vector<std::string> out(n);
    const std::uint8_t* p = all.payload();
    const std::uint8_t* end = p + all.payloadBytes();
    std::vector<std::uint64_t> lens(n);
    if (all.payloadBytes() < n * sizeof(std::uint64_t)) throw CommError("malformed allgather reply");
    std::memcpy(lens.data(), p, n * sizeof(std::uint64_t));
    p += n * sizeof(std::uint64_t);
    for (int r = 0; r < n; ++r) {
      if (lens[r] > static_cast<std::uint64_t>(end - p)) throw CommError("malformed allgather reply");
      out[r].assign(reinterpret_cast<const char*>(p), lens[r]);
      p += lens[r];
    }
    return out;
  }
  std::vector<std::string> out(n);
  out[0] = mine;
  // One deadline for all: the others' grace counts from their own send.
  const auto deadline = Clock::now() + timeout_;
  for (int r = 1; r < n; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    Message m = waitMessage(seq, r, what, std::min(left, timeout_) - timeout_);
    out[r].assign(reinterpret_cast<const char*>(m.payload()), m.payloadBytes());
  }
  std::string packed(n * sizeof(std::uint64_t), '\0');
  for (int r = 0; r < n; ++r) {
    const std::uint64_t len = out[r].size();
    std::memcpy(&packed[r * sizeof(std::uint64_t)], &len, sizeof(len));
  }
  for (const auto& s : out) packed += s;
  for (int r = 1; r < n; ++r) sendTo(r, seq, packed.data(), packed.size());
  return out;
}

std::string ControlChannel::broadcast(const std::string& data, int root, const std::string& what) {
  const std::uint32_t seq = next_seq_++;
  if (transport_.rank() == root) {
    for (int r = 0; r < transport_.size(); ++r) {
      if (r != root) sendTo(r, seq, data.data(), data.size());
    }
    return data;
  }
  Message m = waitMessage(seq, root, what);
  return std::string(reinterpret_cast<const char*>(m.payload()), m.payloadBytes());
}

void ControlChannel::broadcastBytes(void* data, std::size_t bytes, int root, const std::string& what) {
  auto* base = static_cast<char*>(data);
  for (std::size_t off = 0; off < bytes; off += kMaxChunkBytes) {
    const std::uint32_t seq = next_seq_++;
    const std::size_t count = std::min(kMaxChunkBytes, bytes - off);
    if (transport_.rank() == root) {
      for (int r = 0; r < transport_.size(); ++r) {
        if (r != root) sendTo(r, seq, base + off, count);
      }
    } else {
      Message m = waitMessage(seq, root, what);
      if (m.payloadBytes() != count) {
        throw CommError(detail::cat("broadcast of ", what, ": expected ", count, " bytes from rank ", root, ", got ",
                                    m.payloadBytes()));
      }
      std::memcpy(base + off, m.payload(), m.payloadBytes());
    }
  }
}

void ControlChannel::barrier(const std::string& what) { allgather(std::string(), what); }

std::vector<double> ControlChannel::allreduceSum(const std::vector<double>& mine, const std::string& what) {
  std::string bytes(mine.size() * sizeof(double), '\0');
  // An empty vector's data() may be null, which memcpy may not take even for 0 bytes.
  if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), bytes.size());
  std::vector<double> sum(mine.size(), 0.0);
  // Summed in rank order on every rank, so every rank gets the same rounding.
  for (const auto& s : allgather(bytes, what)) {
    if (s.size() != bytes.size()) throw CommError(detail::cat("allreduce of ", what, ": ranks sent different lengths"));
    for (std::size_t i = 0; i < mine.size(); ++i) {
      double v;
      std::memcpy(&v, s.data() + i * sizeof(double), sizeof(double));
      sum[i] += v;
    }
  }
  return sum;
}

}  // namespace poseidon
