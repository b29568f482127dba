#include "client/client.h"

#include <map>

#include "client/ps_syncer.h"
#include "collective/communicator.h"
#include "common/timeline.h"
#include "node/node_stage.h"
#include "poseidon/errors.h"
#include "sfb/sfb_syncer.h"

namespace poseidon {

Client::Client(const InformationBook& book, Transport& transport, ParameterServer* local_server,
               const std::vector<std::vector<float*>>& params, const std::vector<Scheme>& schemes,
               const ClientOptions& options, FailureState& failure)
    : book_(book),
      transport_(transport),
      options_(options),
      failure_(failure),
      ps_(book.model().layers.size(), nullptr),
      sfb_(book.model().layers.size(), nullptr),
      pending_send_(book.model().layers.size()),
      reported_(book.model().layers.size(), false),
      started_(book.model().layers.size(), false),
      schemes_(schemes),
      complete_(book.model().layers.size(), true),
      // One thread per syncer: a syncer blocks in Receive, and no layer's sync should
      // wait for a free thread behind another layer's.
      pool_(static_cast<int>(std::max<std::size_t>(1, book.model().layers.size())), "poseidon-sync", failure) {
  POSEIDON_ENFORCE_EQ(params.size(), book.model().layers.size());
  POSEIDON_ENFORCE_EQ(schemes.size(), book.model().layers.size());
  iteration_ = options.start_iteration;
  std::vector<int> allreduce;
  for (std::size_t l = 0; l < params.size(); ++l) {
    const int layer = static_cast<int>(l);
    if (schemes[l] == Scheme::kAllreduce) {
      allreduce.push_back(layer);
      syncers_.push_back(nullptr);
    } else if (schemes[l] == Scheme::kSFB) {
      auto s = std::make_unique<SfbSyncer>(layer, book, transport, params[l], options.sgd, options.timeout, failure,
                                           options.start_iteration);
      sfb_[l] = s.get();
      syncers_.push_back(std::move(s));
    } else if (!book.pairsOfLayer(layer).empty()) {
      auto s = std::make_unique<PsSyncer>(layer, book, transport, local_server, params[l], failure,
                                          PsSyncerOptions{options.timeout, options.start_iteration, options.staleness,
                                                          options.sgd.gradient_only, options.local_by_message});
      ps_[l] = s.get();
      syncers_.push_back(std::move(s));
    } else {
      syncers_.push_back(nullptr);
    }
  }
  layer_of_key_.resize(book.pairs().size());
  for (const auto& kv : book.pairs()) layer_of_key_[kv.key] = static_cast<std::uint32_t>(kv.layer);
  if (!allreduce.empty()) {
    collective_ =
        std::make_unique<CollectiveSyncer>(book.model(), allreduce, params, transport,
                                           CollectiveOptions{options.kvstore, options.fusion_bytes, options.sgd,
                                                             options.start_iteration, options.timeline, options.node},
                                           failure, [this](int layer) {
                                             {
                                               std::lock_guard<std::mutex> lock(mu_);
                                               complete_[layer] = true;
                                             }
                                             cv_.notify_all();
                                           });
    collective_->schedule(iteration_);
  }
}

Client::~Client() {
  pool_.shutdown();
  if (collective_) collective_->stop();
}

void Client::report(int layer, std::function<void()> send) {
  POSEIDON_ENFORCE(layer >= 0 && layer < static_cast<int>(syncers_.size()), "no layer ", layer);
  if (reported_[layer]) {
    throw Error(detail::cat("layer ", layer, " reported its gradient twice in iteration ", iteration_,
                            "; call step() after every backward pass"));
  }
  reported_[layer] = true;
  pending_send_[layer] = std::move(send);
  // A factor push to the servers waits for the weight's release: the co-located shard
  // updates the engine's weight in place, which autograd may still be about to read.
  if (options_.wfbp && schemes_[layer] != Scheme::kFactorPush) startSync(layer);
}

void Client::gradientsReady(int layer, std::vector<float*> grads) {
  if (schemes_.at(layer) == Scheme::kAllreduce) {
    CollectiveSyncer* c = collective_.get();
    report(layer, [c, layer, grads = std::move(grads)] { c->gradientReady(layer, grads); });
    return;
  }
  PsSyncer* s = ps_.at(layer);
  const std::uint64_t t = iteration_;
  NodeStage* node = options_.node;
  report(layer, [s, t, node, layer, grads = std::move(grads)] {
    if (node) node->addDeviceGradients(layer, t, grads);
    if (s) s->Send(t, grads);
  });
}

void Client::factorsReady(int layer, const float* U, const float* V, std::int64_t K) {
  const std::uint64_t t = iteration_;
  if (schemes_.at(layer) == Scheme::kFactorPush) {
    PsSyncer* ps = ps_.at(layer);
    auto message = std::make_shared<Message>(ps->packFactors(t, U, V, K));
    report(layer, [ps, t, message] { ps->SendFactors(t, std::move(*message)); });
    return;
  }
  SfbSyncer* s = sfb_.at(layer);
  POSEIDON_ENFORCE(s != nullptr, "layer ", layer, " does not go by factors");
  // Packed now: the engine's factor tensors may be gone by the time the sync runs.
  auto message = std::make_shared<Message>(s->pack(t, U, V, K));
  NodeStage* node = options_.node;
  report(layer, [s, t, node, layer, message] {
    s->Send(t, node ? node->stackDeviceFactors(layer, t, std::move(*message)) : std::move(*message));
  });
}

void Client::setFactorGradients(int layer, std::vector<float*> grads) {
  SfbSyncer* s = sfb_.at(layer);
  POSEIDON_ENFORCE(s != nullptr, "layer ", layer, " does not go by SFB");
  if (options_.node) options_.node->setGradientTarget(layer, grads);
  s->setGradientTarget(std::move(grads));
}

bool Client::setFactorApplier(int layer, std::unique_ptr<FactorApplier>& applier) {
  // A node's leader shares the layer's host values with its devices after each step.
  SfbSyncer* s = sfb_.at(layer);
  if (s == nullptr || options_.node != nullptr) return false;
  s->setApplier(std::move(applier));
  return true;
}

void Client::layerReleased(int layer) {
  if (SfbSyncer* s = sfb_.at(layer)) s->release(iteration_);
  if (schemes_.at(layer) == Scheme::kFactorPush && options_.wfbp && reported_[layer] && !started_[layer])
    startSync(layer);
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
  if (schemes_[layer] == Scheme::kAllreduce) {
    send();  // hands the gradient to the engine's queued tasks, which set C[layer]
    return;
  }
  if (syncer == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    complete_[layer] = true;
    return;
  }
  const bool ssp = options_.staleness > 0;
  pool_.schedule([this, syncer, send = std::move(send), t, ssp] {
    Timeline* tl = options_.timeline;
    const std::string track = tl ? "sync " + book_.model().layers[syncer->layer()].name : "";
    const char* scheme = schemeName(schemes_[syncer->layer()]);
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
      if (options_.node) options_.node->share(syncer->layer(), t);
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
  // The backward pass is over: no SFB weight is needed by autograd any more.
  for (auto* s : sfb_) {
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
  if (collective_) collective_->schedule(iteration_);
  if (options_.timeline) {
    // Bytes this worker has sent so far, per scheme: the counters' slopes in the viewer.
    std::map<std::string, double> bytes;
    for (std::size_t l = 0; l < schemes_.size(); ++l)
      bytes[schemeName(schemes_[l])] += bytesSentForLayer(static_cast<int>(l));
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
    if (ps_[layer]) ps_[layer]->rethrowNamingCulprits(e, iteration_ - 1);
    throw;
  }
  if (options_.staleness > 0 && ps_[layer]) ps_[layer]->readFresh(version, iteration_);
}

void Client::waitAll() {
  // Everything up to now, stale or not: sync points and the end see the same values everywhere.
  for (std::size_t l = 0; l < syncers_.size(); ++l) waitSynced(static_cast<int>(l), iteration_);
}

std::uint64_t Client::maxStalenessSeen() const {
  std::uint64_t m = 0;
  for (const auto* s : ps_) {
    if (s) m = std::max(m, s->maxStalenessSeen());
  }
  return m;
}

void Client::onParams(Message message) {
  const auto& h = message.header();
  if (h.key >= layer_of_key_.size()) {
    throw CommError(detail::cat("rank ", h.source, " sent values for KV pair ", h.key, ", which does not exist"));
  }
  PsSyncer* s = ps_[layer_of_key_[h.key]];
  if (!s)
    throw CommError(detail::cat("rank ", h.source, " sent values for KV pair ", h.key, " of a layer not on the PS"));
  s->deliver(h.key, h.iteration, std::move(message));
}

void Client::onLocalFresh(std::uint32_t key, std::uint64_t version) {
  ps_[layer_of_key_[key]]->deliver(key, version, Message());
}

void Client::onFactors(Message message) {
  const auto layer = message.header().key;
  if (layer >= sfb_.size() || sfb_[layer] == nullptr) {
    throw CommError(detail::cat("rank ", message.header().source, " sent factors for layer ", layer,
                                ", which does not go by SFB here: the ranks' plans differ"));
  }
  sfb_[layer]->deliver(std::move(message));
}

std::uint64_t Client::bytesSentForLayer(int layer) const {
  if (schemes_[layer] == Scheme::kAllreduce) {
    // A fused collective carries several layers: the communicators count each call's bytes
    // in the transport's totals (allreduceBytesSent); per layer they are its share,
    // 2 (P-1)/P of the layer's bytes per synced iteration.
    return allreduceBytesSent(collective_->floatsOfLayer(layer), collective_->workers()) * iteration_;
  }
  return syncers_[layer] ? syncers_[layer]->bytesSent() : 0;
}

void Client::addStateRecords(std::vector<StateRecord>& records) {
  for (auto* s : sfb_) {
    if (s) s->addStateRecords(records);
  }
  if (collective_) collective_->addStateRecords(records);
}

void Client::addReplicatedStateToDigest(Digest& digest) const {
  for (const auto* s : sfb_) {
    if (s) s->addToDigest(digest);
  }
  if (collective_) collective_->addToDigest(digest);
}

}  // namespace poseidon
