#include "sfb/sfb_syncer.h"

#include <cstring>

#include "comm/factors.h"
#include "common/digest.h"
#include "coordinator/cost_model.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {
const LayerInfo& fcLayer(const InformationBook& book, int layer, const std::vector<float*>& params) {
  const LayerInfo& info = book.model().layers[layer];
  POSEIDON_ENFORCE(info.kind == LayerKind::kFC && !params.empty(), "SFB needs an FC layer");
  return info;
}
}  // namespace

SfbSyncer::SfbSyncer(int layer, const InformationBook& book, Transport& transport, std::vector<float*> params,
                     const SgdOptions& options, std::chrono::milliseconds timeout, const FailureState& failure,
                     std::uint64_t start_iteration, WireFormat wire)
    : LayerSyncer(layer, schemeName(Scheme::kSFB)),
      book_(book),
      transport_(transport),
      options_(options),
      timeout_(timeout),
      failure_(failure),
      M_(fcLayer(book, layer, params).M),
      N_(fcLayer(book, layer, params).N),
      wire_(wire),
      tensors_(params.size()),
      first_step_(start_iteration == 0),
      shares_(book.cluster().workers(), layer, "factors"),
      applied_(start_iteration),
      released_(start_iteration) {
  auto host = std::make_unique<HostFactorApplier>(M_, N_, params);
  host_ = host.get();
  applier_ = std::move(host);
  for (int r = 0; r < book.cluster().workers(); ++r) workers_.push_back(r);
}

void SfbSyncer::setGradientTarget(std::vector<float*> grads) {
  POSEIDON_ENFORCE_EQ(grads.size(), tensors_, "gradient buffers of SFB layer ", layer());
  POSEIDON_ENFORCE(options_.gradient_only, "an SFB gradient target outside gradient mode");
  POSEIDON_ENFORCE(host_ != nullptr, "layer ", layer(), " is applied by the engine: it keeps its own gradient target");
  std::lock_guard<std::mutex> lock(mu_);
  host_->setTarget(grads);
}

bool SfbSyncer::setApplier(std::unique_ptr<FactorApplier>& applier) {
  std::lock_guard<std::mutex> lock(mu_);
  host_ = nullptr;
  applier_ = std::move(applier);
  return true;
}

LayerSyncer::SendFn SfbSyncer::factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K) {
  auto message = std::make_shared<Message>(wireMessage(t, U, V, K));
  return [this, t, message] { Send(t, std::move(*message)); };
}

Message SfbSyncer::factorMessage(std::uint64_t iteration, const float* U, const float* V, std::int64_t K) const {
  return packFactors(MsgType::kFactors, layer(), transport_.rank(), iteration, U, V, K, M_, N_);
}

Message SfbSyncer::wireMessage(std::uint64_t iteration, const float* U, const float* V, std::int64_t K) const {
  if (wire_ == WireFormat::kFp32) return factorMessage(iteration, U, V, K);
  return packFactors16(wire_, layer(), transport_.rank(), iteration, U, V, K, M_, N_);
}

void SfbSyncer::Send(std::uint64_t iteration, Message factors) {
  if (wire_ != WireFormat::kFp32 && factors.type() == MsgType::kFactors) {
    // A node's stacked factors (NodeStage::stackDeviceFactors): rounded once, here.
    const std::int64_t K = factorRows(factors, WireFormat::kFp32, M_, N_);
    factors = wireMessage(iteration, factors.floats(), factors.floats() + K * M_, K);
  }
  const int me = transport_.rank();
  factors.setPriority(layer());
  for (int w : workers_) {
    if (w == me) continue;
    transport_.send(w, factors);
    bytes_sent_ += factors.wireBytes();
  }
  // This worker's own share, in its rank's slot: read from the message as the peers read it
  // (on a 16-bit wire, the same rounded factors).
  deliver(std::move(factors));
}

void SfbSyncer::deliver(Message m) {
  const auto type = static_cast<MsgType>(m.header().type);
  if (type != MsgType::kFactors && type != MsgType::kFactors16) {
    LayerSyncer::deliver(std::move(m));
    return;
  }
  // Zero rows: the worker did not use the layer this iteration (a zero contribution).
  // Throws for a size of no whole rows, or a width other than this run's wire.
  factorRows(m, wire_, M_, N_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    shares_.keep(std::move(m), applied_);
  }
  cv_.notify_all();
}

void SfbSyncer::release(std::uint64_t iteration) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = std::max(released_, iteration + 1);
  }
  cv_.notify_all();
}

void SfbSyncer::Receive(std::uint64_t iteration) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, cv_, [&] { return shares_.complete(iteration); }, timeout_, &failure_,
      detail::cat("rank ", transport_.rank(), ": factors of layer '", book_.model().layers[layer()].name,
                  "' from every worker for iteration ", iteration));
  // The weight may change only once autograd has used it for this iteration's input gradient.
  waitFor(
      lock, cv_, [&] { return released_ > iteration; }, timeout_, &failure_,
      detail::cat("rank ", transport_.rank(), ": backward pass past layer '", book_.model().layers[layer()].name, "'"));
}

void SfbSyncer::Move(std::uint64_t iteration) {
  std::vector<Message> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine = shares_.take(iteration);
  }
  // Stack every worker's U and V in rank order: the same bytes, hence the same sums, everywhere.
  std::int64_t rows = 0;
  for (const auto& m : mine) rows += factorRows(m, wire_, M_, N_);
  std::vector<float> U(static_cast<std::size_t>(rows * M_)), V(static_cast<std::size_t>(rows * N_));
  std::int64_t at = 0;
  for (const auto& m : mine) {
    at += unpackFactors(m, wire_, M_, N_, U.data() + at * M_, V.data() + at * N_);
  }
  const SgdOptions o = options_.at(iteration);
  const float scale = 1.0f / static_cast<float>(static_cast<int>(workers_.size()) * o.devices);
  if (rows == 0) {
    // No rank used the layer (each sent no factor rows): it stays as it is, as an optimizer
    // skips a parameter whose .grad is None (DDP's rule), momentum included.
    std::lock_guard<std::mutex> lock(mu_);
    applied_ = iteration + 1;
    return;
  }
  applier_->apply(StackedFactors{U.data(), V.data(), rows, M_, N_}, scale, o, first_step_);
  first_step_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  applied_ = iteration + 1;
}

void SfbSyncer::addStateRecords(std::vector<StateRecord>& records) {
  if (options_.momentum == 0.0f) return;
  const std::size_t first = records.size();
  applier_->addMomentumRecords("sfb/" + book_.model().layers[layer()].name + "/", records);
  // The applier lists the layer's tensors in order (weight, bias), as the model does.
  for (std::size_t i = first; i < records.size(); ++i) {
    records[i].momentum_of = ParamSlice{layer(), static_cast<int>(i - first), 0};
    records[i].replicated = true;
  }
}

void SfbSyncer::addToDigest(Digest& d) const {
  for (const auto& r : applier_->replicated()) d.update(r.data, r.bytes);
}

}  // namespace poseidon
