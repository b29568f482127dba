// The Syncer of a layer that goes by sparse rows: a layer whose gradient touches only some
// rows of its one tensor (an embedding's lookup: the rows of the tokens in the batch). For
// iteration t:
//   gradientsReady - pack the rows this worker's gradient touched and their indices (or the
//                    whole gradient, where that is smaller: sparse/row_message.h);
//   Send    - send them to every other worker;
//   Receive - block until every worker's rows for t have arrived;
//   Move    - add them, in rank order, into a zeroed sum of the whole layer and take the
//             optimizer step on every row, as SFB layers do (server mode: SGD with the
//             replicated momentum and weight decay, so untouched rows decay exactly as under
//             PS or DDP), or write the mean gradient into the layer's gradient for the
//             user's optimizer (gradient mode). Every worker sums the same bytes in the same
//             order, so replicas stay identical.
// Nothing waits for autograd: the gradient is complete when it is handed over, and an
// embedding's backward does not read its weight.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/transport.h"
#include "common/wait.h"
#include "coordinator/information_book.h"
#include "poseidon/sgd_options.h"
#include "sync/layer_syncer.h"
#include "sync/worker_shares.h"

namespace poseidon {

class RowsSyncer final : public LayerSyncer {
 public:
  RowsSyncer(int layer, const InformationBook& book, Transport& transport, std::vector<float*> params,
             const SgdOptions& options, std::chrono::milliseconds timeout, const FailureState& failure,
             std::uint64_t start_iteration = 0);

  // Packs this worker's rows at once (the gradient is read now); sent when the sync starts.
  SendFn gradientsReady(std::uint64_t t, std::vector<float*> grads, std::shared_ptr<const void> owner) override;
  void Receive(std::uint64_t iteration) override;
  void Move(std::uint64_t iteration) override;
  void deliver(Message rows) override;
  void usedByNoRank(std::uint64_t t) override { unused_before_ = t + 1; }

  void addToDigest(Digest& digest) const override;
  void addStateRecords(std::vector<StateRecord>& records) override;
  void momentumSeeded() override { first_step_ = false; }

 private:
  void Send(Message rows);

  const InformationBook& book_;
  Transport& transport_;
  const SgdOptions options_;
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
  const std::int64_t rows_, width_;
  float* const weight_;
  std::vector<float> sum_;       // the summed gradient of the whole layer, rebuilt each Move
  std::vector<float> momentum_;  // replicated (server mode, momentum != 0)
  bool first_step_;
  std::uint64_t unused_before_ = 0;  // 1 + the iteration no rank used this layer in
  // Whether iteration t's step is skipped (no rank used the layer), by t's parity: decided at
  // t's hand-over, which comes after usedByNoRank(t), while Move(t-1) may still run (a later
  // usedByNoRank must not reach it).
  bool skip_[2] = {false, false};
  int workers_;

  // Between gradientsReady and Move of the same iteration: the gradient (gradient mode
  // writes the mean there; server mode clears this worker's rows of it) and its owner.
  float* grad_ = nullptr;
  std::shared_ptr<const void> grad_owner_;

  std::mutex mu_;
  std::condition_variable cv_;
  WorkerShares shares_;  // every worker's rows, by iteration parity; guarded by mu_
  std::uint64_t moved_ = 0;  // iterations moved here
};

}  // namespace poseidon
