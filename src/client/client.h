// The client library of one worker (ATC'17 §4.2): a Syncer per layer, a thread pool that
// runs them, and the BSP completion vector C. Wait-free back-propagation: the adapter
// calls gradientsReady(l) the moment layer l's gradient exists, and sync(l) starts on the
// pool at once while back-propagation continues below; the next forward of layer l waits
// only for C[l]. Without WFBP the syncs start together after the whole backward pass.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "client/syncer.h"
#include "client/thread_pool.h"
#include "common/wait.h"

namespace poseidon {

struct ClientOptions {
  bool wfbp = true;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

class Client {
 public:
  // `params[l]` are layer l's tensors in the engine, in ModelInfo order.
  Client(const InformationBook& book, Transport& transport, ParameterServer* local_server,
         const std::vector<std::vector<float*>>& params, const ClientOptions& options, FailureState& failure);
  ~Client();

  // Layer l's gradient for the current iteration is complete in `grads`.
  void gradientsReady(int layer, std::vector<float*> grads);
  // The backward pass is over: without WFBP the syncs start now. Advances the iteration.
  void endIteration();
  // Blocks until layer l holds the parameters of the current iteration (C[l]).
  void waitLayer(int layer);
  void waitAll();

  // Fresh values from a remote shard (transport thread) or the local one (server thread).
  void onParams(Message message);
  void onLocalFresh(std::uint32_t key, std::uint64_t version);

  std::uint64_t iteration() const { return iteration_; }
  std::uint64_t bytesSentForLayer(int layer) const;

 private:
  void startSync(int layer);

  const InformationBook& book_;
  Transport& transport_;
  const ClientOptions options_;
  FailureState& failure_;
  std::vector<std::unique_ptr<Syncer>> syncers_;  // by layer
  std::vector<std::uint32_t> layer_of_key_;
  std::uint64_t iteration_ = 0;  // compute thread only
  std::vector<std::vector<float*>> deferred_;  // compute thread only: grads held back without WFBP
  std::vector<bool> reported_;                 // compute thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> complete_;  // guarded by mu_: the BSP vector C
  ThreadPool pool_;             // last: its threads stop before the syncers go
};

}  // namespace poseidon
