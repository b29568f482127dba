#include "client/client.h"

#include <map>

#include "ps/ps_syncer.h"
#include "node/node_leader_syncer.h"
#include "node/node_stage.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"
#include "sfb/sfb_syncer.h"
#include "sparse/rows_syncer.h"

namespace poseidon {

Client::Client(const InformationBook& book, Transport& transport, ParameterServer* local_server,
               const std::vector<std::vector<float*>>& params, const std::vector<Scheme>& schemes,
               const ClientOptions& options, FailureState& failure)
    : book_(book),
      transport_(transport),
      options_(options),
      failure_(failure),
      pending_send_(book.model().layers.size()),
      reported_(book.model().layers.size(), false),
      started_(book.model().layers.size(), false),
      complete_(book.model().layers.size(), true),
      // One thread per syncer: a syncer blocks in Receive, and no layer's sync should
      // wait for a free thread behind another layer's.
      pool_(static_cast<int>(std::max<std::size_t>(1, book.model().layers.size())), "poseidon-sync", failure) {
  POSEIDON_ENFORCE_EQ(params.size(), book.model().layers.size());
  POSEIDON_ENFORCE_EQ(schemes.size(), book.model().layers.size());
  iteration_ = options.start_iteration;
  std::vector<int> allreduce;
  for (std::size_t l = 0; l < schemes.size(); ++l) {
    if (schemes[l] == Scheme::kAllreduce) allreduce.push_back(static_cast<int>(l));
  }
  if (!allreduce.empty()) {
    AllreduceOptions buckets;
    buckets.kvstore = options.kvstore;
    buckets.fusion_bytes = options.fusion_bytes;
    buckets.sgd = options.sgd;
    buckets.start_iteration = options.start_iteration;
    buckets.timeline = options.timeline;
    if (NodeStage* node = options.node) {  // the devices level, in the allreduce layers' own tasks
      buckets.before_copy = [node](int layer, std::uint64_t t, const std::vector<float*>& grads) {
        node->addDeviceGradients(layer, t, grads);
      };
      buckets.after_step = [node](int layer, std::uint64_t t) { node->share(layer, t); };
    }
    allreduce_ = std::make_unique<AllreduceBuckets>(book.model(), allreduce, params, transport, buckets, failure,
                                                    [this](int layer) {
                                                      {
                                                        std::lock_guard<std::mutex> lock(mu_);
                                                        complete_[layer] = true;
                                                      }
                                                      cv_.notify_all();
                                                    });
  }
  for (std::size_t l = 0; l < params.size(); ++l) {
    auto syncer = makeSyncer(static_cast<int>(l), schemes[l], local_server, params[l]);
    // On a node's leader the devices level wraps the scheme (allreduce layers: in their tasks, above).
    if (syncer && options.node && !syncer->runsItself()) {
      syncer = std::make_unique<NodeLeaderSyncer>(std::move(syncer), *options.node);
    }
    syncers_.push_back(std::move(syncer));
  }
  layer_of_key_.resize(book.pairs().size());
  for (const auto& kv : book.pairs()) layer_of_key_[kv.key] = static_cast<std::uint32_t>(kv.layer);
  if (allreduce_) allreduce_->schedule(iteration_);
}

// The one place that knows the schemes: everything after goes through LayerSyncer.
std::unique_ptr<LayerSyncer> Client::makeSyncer(int layer, Scheme scheme, ParameterServer* local_server,
                                                const std::vector<float*>& params) {
  if (scheme == Scheme::kAllreduce) return std::make_unique<AllreduceSyncer>(layer, *allreduce_);
  if (scheme == Scheme::kSFB) {
    return std::make_unique<SfbSyncer>(layer, book_, transport_, params, options_.sgd, options_.timeout, failure_,
                                       options_.start_iteration, options_.factor_wire);
  }
  if (scheme == Scheme::kRows) {
    return std::make_unique<RowsSyncer>(layer, book_, transport_, params, options_.sgd, options_.timeout, failure_,
                                        options_.start_iteration);
  }
  if (book_.pairsOfLayer(layer).empty()) return nullptr;  // nothing on the servers to sync
  return std::make_unique<PsSyncer>(
      layer, book_, transport_, local_server, params, failure_,
      PsSyncerOptions{options_.timeout, options_.start_iteration, options_.staleness, options_.sgd.gradient_only,
                      options_.local_by_message, scheme == Scheme::kFactorPush,
                      scheme == Scheme::kPS ? options_.wire : WireFormat::kFp32,
                      scheme == Scheme::kPS ? options_.update_wire : WireFormat::kFp32, options_.error_feedback});
}

LayerSyncer& Client::syncer(int layer) const {
  POSEIDON_ENFORCE(layer >= 0 && layer < static_cast<int>(syncers_.size()), "no layer ", layer);
  POSEIDON_ENFORCE(syncers_[layer] != nullptr, "layer ", layer, " has nothing to sync");
  return *syncers_[layer];
}

Client::~Client() {
  pool_.shutdown();
  if (allreduce_) allreduce_->stop();
}

void Client::report(int layer, LayerSyncer::SendFn send) {
  if (reported_[layer]) {
    throw Error(detail::cat("layer ", layer, " reported its gradient twice in iteration ", iteration_,
                            "; call step() after every backward pass"));
  }
  reported_[layer] = true;
  pending_send_[layer] = std::move(send);
  const LayerSyncer* s = syncers_[layer].get();
  if (options_.wfbp && !(s && s->startsAtRelease())) startSync(layer);
}

void Client::gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> owner) {
  POSEIDON_ENFORCE(layer >= 0 && layer < static_cast<int>(syncers_.size()), "no layer ", layer);
  LayerSyncer* s = syncers_[layer].get();
  report(layer, s ? s->gradientsReady(iteration_, std::move(grads), std::move(owner)) : LayerSyncer::SendFn());
}

void Client::factorsReady(int layer, const float* U, const float* V, std::int64_t K) {
  report(layer, syncer(layer).factorsReady(iteration_, U, V, K));
}

void Client::setFactorGradients(int layer, std::vector<float*> grads) {
  syncer(layer).setGradientTarget(std::move(grads));
}

bool Client::setFactorApplier(int layer, std::unique_ptr<FactorApplier>& applier) {
  return syncers_.at(layer) && syncers_[layer]->setApplier(applier);
}

void Client::layerReleased(int layer) {
  LayerSyncer* s = syncers_.at(layer).get();
  if (!s) return;
  s->release(iteration_);
  if (s->startsAtRelease() && options_.wfbp && reported_[layer] && !started_[layer]) startSync(layer);
}

void Client::startSync(int layer) {
  started_[layer] = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    POSEIDON_ENFORCE(complete_[layer], "layer ", layer, " started a sync while its previous one runs");
    complete_[layer] = false;
  }
  LayerSyncer* syncer = syncers_[layer].get();
  auto send = std::move(pending_send_[layer]);
  const std::uint64_t t = iteration_;
  if (syncer == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    complete_[layer] = true;
    return;
  }
  if (syncer->runsItself()) {
    send();  // e.g. hands the gradient to the collective engine's queued tasks, which set C[layer]
    return;
  }
  const bool ssp = options_.staleness > 0;
  pool_.schedule([this, syncer, send = std::move(send), t, ssp] {
    Timeline* tl = options_.timeline;
    const std::string track = tl ? "sync " + book_.model().layers[syncer->layer()].name : "";
    const char* scheme = syncer->scheme();
    {
      TimelineSpan span(tl, track, "send", scheme);
      send();
    }
    // SSP: the gradient is out (copied); the fresh values are read before the layer's next
    // forward, as stale as the bound allows (waitLayer).
    if (!ssp) {
      {
        TimelineSpan span(tl, track, "receive", scheme);
        syncer->Receive(t);
      }
      TimelineSpan span(tl, track, "apply", scheme);
      syncer->Move(t);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      complete_[syncer->layer()] = true;
    }
    cv_.notify_all();
  });
}

void Client::endIteration() {
  for (std::size_t l = 0; l < reported_.size(); ++l) {
    if (!reported_[l]) {
      throw Error(detail::cat("layer '", book_.model().layers[l].name, "' produced no gradient in iteration ",
                              iteration_, "; every layer with parameters must take part in the loss"));
    }
  }
  // The backward pass is over: no weight is needed by autograd any more.
  for (auto& s : syncers_) {
    if (s) s->release(iteration_);
  }
  // Top layer first, as back-propagation would have produced them: all of them without
  // WFBP, and with WFBP any factor push whose release did not come (the first layer).
  for (int l = static_cast<int>(syncers_.size()) - 1; l >= 0; --l) {
    if (!started_[l]) startSync(l);
  }
  reported_.assign(reported_.size(), false);
  started_.assign(started_.size(), false);
  ++iteration_;
  if (allreduce_) allreduce_->schedule(iteration_);
  if (options_.timeline) {
    // Bytes this worker has sent so far, per scheme: the counters' slopes in the viewer.
    std::map<std::string, double> bytes;
    for (const auto& s : syncers_) {
      if (s) bytes[s->scheme()] += static_cast<double>(s->bytesSent());
    }
    const auto now = Timeline::Clock::now();
    for (const auto& [scheme, b] : bytes) options_.timeline->counter("bytes sent: " + scheme, b, now);
  }
}

void Client::waitLayer(int layer) {
  const std::uint64_t s = static_cast<std::uint64_t>(options_.staleness);
  waitSynced(layer, iteration_ >= s ? iteration_ - s : 0);
}

void Client::waitSynced(int layer, std::uint64_t version) {
  try {
    std::unique_lock<std::mutex> lock(mu_);
    waitFor(
        lock, cv_, [&] { return complete_[layer]; }, options_.timeout, &failure_,
        detail::cat("rank ", transport_.rank(), ": sync of layer '", book_.model().layers[layer].name,
                    "' for iteration ", iteration_ - 1));
  } catch (const TimeoutError& e) {
    // This wait and the layer's own may run out together: either names the silent workers.
    if (syncers_[layer]) syncers_[layer]->explainTimeout(e, iteration_ - 1);
    throw;
  }
  if (syncers_[layer]) syncers_[layer]->beforeRead(version, iteration_);
}

void Client::waitAll() {
  // Everything up to now, stale or not: sync points and the end see the same values everywhere.
  for (std::size_t l = 0; l < syncers_.size(); ++l) waitSynced(static_cast<int>(l), iteration_);
}

std::uint64_t Client::maxStalenessSeen() const {
  std::uint64_t m = 0;
  for (const auto& s : syncers_) {
    if (s) m = std::max(m, s->maxStalenessSeen());
  }
  return m;
}

void Client::onParams(Message message) {
  const std::uint32_t pair = message.pair();
  if (pair >= layer_of_key_.size()) {
    throw CommError(
        detail::cat("rank ", message.header().source, " sent values for KV pair ", pair, ", which does not exist"));
  }
  const int layer = static_cast<int>(layer_of_key_[pair]);  // before the message moves
  deliver(layer, std::move(message));
}

void Client::onLocalFresh(std::uint32_t key, std::uint64_t version) {
  syncer(static_cast<int>(layer_of_key_.at(key))).localFresh(key, version);
}

void Client::onLayerMessage(Message message) {
  const int layer = static_cast<int>(message.layer());  // before the message moves
  deliver(layer, std::move(message));
}

void Client::deliver(int layer, Message message) {
  if (layer < 0 || layer >= static_cast<int>(syncers_.size()) || syncers_[layer] == nullptr) {
    throw CommError(detail::cat("rank ", message.header().source, " sent a message for layer ", layer,
                                ", which has nothing to sync here: the ranks' plans differ"));
  }
  syncers_[layer]->deliver(std::move(message));
}

std::uint64_t Client::bytesSentForLayer(int layer) const {
  return syncers_.at(layer) ? syncers_[layer]->bytesSent() : 0;
}

void Client::addStateRecords(std::vector<StateRecord>& records) {
  for (auto& s : syncers_) {
    if (s) s->addStateRecords(records);
  }
  if (allreduce_) allreduce_->addStateRecords(records);
}

void Client::addAllreduceMomentum(std::vector<StateRecord>& records) const {
  if (allreduce_) allreduce_->addMomentumRecords(records);
}

void Client::skipUnused(std::uint64_t t, const std::vector<bool>& unused) {
  for (std::size_t l = 0; l < syncers_.size(); ++l) {
    if (syncers_[l] && unused.at(l)) syncers_[l]->usedByNoRank(t);
  }
  if (allreduce_) allreduce_->skipUnused(t, unused);
}

void Client::momentumSeeded() {
  for (auto& s : syncers_) {
    if (s) s->momentumSeeded();
  }
  if (allreduce_) allreduce_->momentumSeeded();
}

void Client::addReplicatedStateToDigest(Digest& digest) const {
  for (const auto& s : syncers_) {
    if (s) s->addToDigest(digest);
  }
  if (allreduce_) allreduce_->addToDigest(digest);
}

}  // namespace poseidon
