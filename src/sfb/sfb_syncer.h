// The Syncer of a layer that goes by sufficient factor broadcasting. For iteration t:
//   Send    - broadcast this worker's factors (U, V) to every other worker;
//   Receive - block until the factors of all workers for t have arrived;
//   Move    - once autograd no longer needs the layer's weight for this backward pass
//             (release), stack the factors in rank order and hand them to the layer's
//             FactorApplier: it reconstructs the mean gradient and applies the optimizer
//             step to the weight and bias (host buffers, or the engine's own applier on a
//             GPU). Every worker does the same, so replicas stay identical; the optimizer
//             state is replicated.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sync/layer_syncer.h"
#include "sync/worker_shares.h"
#include "comm/transport.h"
#include "common/wait.h"
#include "coordinator/information_book.h"
#include "poseidon/factor_applier.h"
#include "update/sgd.h"
#include "sfb/host_applier.h"

namespace poseidon {

class SfbSyncer final : public LayerSyncer {
 public:
  SfbSyncer(int layer, const InformationBook& book, Transport& transport, std::vector<float*> params,
            const SgdOptions& options, std::chrono::milliseconds timeout, const FailureState& failure,
            std::uint64_t start_iteration = 0, WireFormat wire = WireFormat::kFp32);

  // This worker's factors: packed at once (the engine's tensors may go), sent when the sync starts.
  SendFn factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K) override;
  // Packs this worker's factors (K x M gradients at the output, K x N inputs) into an fp32
  // kFactors message: the form a node's leader stacks its devices' factors under. Send
  // rounds such a message once on a 16-bit wire.
  Message factorMessage(std::uint64_t iteration, const float* U, const float* V, std::int64_t K) const override;
  void sendFactorMessage(std::uint64_t iteration, Message factors) override { Send(iteration, std::move(factors)); }
  // Sends the factors to every other worker and to this one, in the wire's width: a kFactors
  // message is packed as kFactors16 first on a 16-bit wire.
  void Send(std::uint64_t iteration, Message factors);
  void Receive(std::uint64_t iteration) override;
  void Move(std::uint64_t iteration) override;
  // Gradient mode: Move writes the mean gradient here (weight, then bias if any) instead
  // of stepping the parameters. Called before each iteration's factors are handed over (the
  // user's optimizer may have replaced the gradient tensors), while no Move runs.
  void setGradientTarget(std::vector<float*> grads) override;
  // The engine reconstructs and steps this layer itself from now on (before the first
  // iteration's factors are handed over).
  bool setApplier(std::unique_ptr<FactorApplier>& applier) override;
  // Autograd is done with the weight for iteration t's backward pass.
  void release(std::uint64_t iteration) override;
  // A peer's factors (transport thread).
  void deliver(Message factors) override;

  // Digest of the replicated state (weight, bias, momentum), for --verify.
  void addToDigest(Digest& digest) const override;
  // The replicated optimizer state, for checkpoints.
  void addStateRecords(std::vector<StateRecord>& records) override;
  void momentumSeeded() override { first_step_ = false; }

 private:
  // The factors as they travel: factorMessage's, or kFactors16 on a 16-bit wire.
  Message wireMessage(std::uint64_t iteration, const float* U, const float* V, std::int64_t K) const;
  const InformationBook& book_;
  Transport& transport_;
  const SgdOptions options_;
  const std::chrono::milliseconds timeout_;
  const FailureState& failure_;
  const std::int64_t M_, N_;
  const WireFormat wire_;  // how the factors travel
  const std::size_t tensors_;  // weight, and bias if any
  HostFactorApplier* host_;    // the host applier while it is the one in use, else null
  std::unique_ptr<FactorApplier> applier_;
  bool first_step_;           // no step has run yet: the momentum starts from the gradient
  std::vector<int> workers_;  // ranks that exchange factors

  std::mutex mu_;
  std::condition_variable cv_;
  WorkerShares shares_;  // every worker's factors, by iteration parity; guarded by mu_
  std::uint64_t applied_ = 0;   // iterations whose step has been applied here
  std::uint64_t released_ = 0;  // iterations whose backward pass is past this layer
};

}  // namespace poseidon
