// A device's side of the devices level (the 2015 paper's three levels): a rank that is not
// its node's leader sends no training traffic over the network (only the control channel's
// small messages, such as buffer broadcasts). Each layer's gradient (or factors) goes to
// the leader as soon as autograd produces it (wait-free, as on the leader); the leader's
// fresh values (or mean gradient) for the layer come back, and the device's forward waits
// for them per layer (the BSP vector C, as in the Client).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "comm/transport.h"
#include "common/thread_pool.h"
#include "common/wait.h"
#include "node/node_memory.h"
#include "node/pieces.h"
#include "node/worker.h"
#include "poseidon/model_info.h"
#include "poseidon/options.h"

namespace poseidon {

struct DeviceOptions {
  bool gradient_mode = false;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::uint64_t start_iteration = 0;
  std::size_t piece_floats = kDefaultPairBytes / sizeof(float);  // a KV pair's size
};

class DeviceClient : public Worker {
 public:
  // `memory` (may be null: messages only) is shared with the leader (node_memory.h).
  DeviceClient(const ModelInfo& model, const std::vector<bool>& factors, Transport& world, int leader,
               std::vector<std::vector<float*>> params, const DeviceOptions& options, FailureState& failure,
               const NodeMemory* memory);
  ~DeviceClient() override;

  void gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> owner) override;
  void factorsReady(int layer, const float* U, const float* V, std::int64_t K) override;
  void setFactorGradients(int layer, std::vector<float*> grads) override;
  void layerReleased(int layer) override;
  void endIteration() override;
  void waitLayer(int layer) override;
  void waitAll() override;
  std::uint64_t iteration() const override { return iteration_; }
  // A piece of the leader's values for a layer, or word that they are in the shared
  // memory (transport thread).
  void deliver(Message message);

 private:
  // Clears C[l] and, on the pool, waits for the leader's values and moves them in.
  void expect(int layer, std::vector<float*> grads);
  void apply(int layer, std::uint64_t t, const std::vector<float*>& grads);
  void waitSynced(int layer);

  const ModelInfo& model_;
  const std::vector<bool> factors_;  // by layer: goes by sufficient factors
  Transport& world_;
  const int leader_;
  std::vector<std::vector<float*>> params_;
  std::vector<std::vector<float*>> factor_targets_;  // gradient mode, SFB layers
  const DeviceOptions options_;
  FailureState& failure_;
  const NodeMemory* const memory_;
  const int slot_;              // this device's slot in memory_
  std::uint64_t iteration_;     // compute thread only
  std::vector<bool> reported_;  // compute thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> complete_;          // guarded by mu_
  std::vector<PieceAssembly> arrived_;  // guarded by mu_: by layer
  // guarded by mu_: by layer, the iteration + 1 whose values wait in memory_ (0: none)
  std::vector<std::uint64_t> in_memory_;
  std::vector<std::uint64_t> released_;  // guarded by mu_: by layer, iterations released
  ThreadPool pool_;                      // last: its threads stop before the rest goes
};

}  // namespace poseidon
