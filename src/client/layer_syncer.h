// What the client's thread pool runs for one layer and one iteration, whatever the
// scheme: the scheme-specific Send has happened, then Receive and Move.
#pragma once

#include <cstdint>

namespace poseidon {

class LayerSyncer {
 public:
  explicit LayerSyncer(int layer) : layer_(layer) {}
  virtual ~LayerSyncer() = default;
  int layer() const { return layer_; }
  // Blocks until everything this layer needs for iteration t has arrived.
  virtual void Receive(std::uint64_t iteration) = 0;
  // Brings the engine's parameters of this layer to their state after iteration t.
  virtual void Move(std::uint64_t iteration) = 0;
  // Bytes this syncer has sent.
  std::uint64_t bytesSent() const { return bytes_sent_; }

 protected:
  std::uint64_t bytes_sent_ = 0;  // written by the pool thread running this syncer only

 private:
  const int layer_;
};

}  // namespace poseidon
