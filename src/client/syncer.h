// One Syncer per layer (ATC'17 §4.2). For iteration t:
//   Send    - push this layer's gradient, cut into KV pairs, to the shards that own them
//             (the co-located shard reads it in place, remote ones get a copy);
//   Receive - block until every pair of the layer is fresh (version t+1);
//   Move    - copy fresh values that arrived as messages into the engine's parameters and
//             clear the engine's gradient for the next iteration.
// Fresh values may arrive before Receive starts; they wait in the syncer's slots.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "comm/transport.h"
#include "common/wait.h"
#include "coordinator/information_book.h"

namespace poseidon {

class ParameterServer;

// Where one layer's tensors live in the engine.
struct LayerBuffers {
  std::vector<float*> params;  // per tensor of the layer
  std::vector<float*> grads;   // per tensor; refreshed each iteration by the adapter
};

class Syncer {
 public:
  Syncer(int layer, const InformationBook& book, Transport& transport, ParameterServer* local_server,
         std::vector<float*> params, std::chrono::milliseconds timeout, const FailureState& failure);

  int layer() const { return layer_; }
  void Send(std::uint64_t iteration, const std::vector<float*>& grads);
  void Receive(std::uint64_t iteration);
  void Move(std::uint64_t iteration);

  // Called on the transport thread (remote shard) or the local server thread.
  void deliver(std::uint32_t key, std::uint64_t version, Message message);

  std::uint64_t bytesSent() const { return bytes_sent_; }

 private:
  struct Slot {
    std::uint64_t version = 0;  // version of the values it last received
    Message message;            // empty when the values came from the local shard
  };

  const int layer_;
  const InformationBook& book_;
  Transport& transport_;
  ParameterServer* const local_server_;
  const std::vector<float*> params_;
  std::vector<float*> grads_;  // of the iteration in progress; cleared by Move
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
  const std::vector<std::uint32_t>& keys_;
  std::atomic<std::uint64_t> bytes_sent_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;  // guarded by mu_; by position in keys_
  int fresh_ = 0;            // guarded by mu_; slots at the awaited version
  std::uint64_t awaited_ = 1;  // guarded by mu_
};

}  // namespace poseidon
