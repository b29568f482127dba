#include "client/client.h"

#include "poseidon/errors.h"

namespace poseidon {

Client::Client(const InformationBook& book, Transport& transport, ParameterServer* local_server,
               const std::vector<std::vector<float*>>& params, const ClientOptions& options,
               FailureState& failure)
    : book_(book),
      transport_(transport),
      options_(options),
      failure_(failure),
      deferred_(book.model().layers.size()),
      reported_(book.model().layers.size(), false),
      complete_(book.model().layers.size(), true),
      // One thread per syncer: a syncer blocks in Receive, and no layer's sync should
      // wait for a free thread behind another layer's.
      pool_(static_cast<int>(std::max<std::size_t>(1, book.model().layers.size())), "poseidon-sync", failure) {
  POSEIDON_ENFORCE_EQ(params.size(), book.model().layers.size());
  for (std::size_t l = 0; l < params.size(); ++l) {
    syncers_.push_back(book.pairsOfLayer(static_cast<int>(l)).empty()
                           ? nullptr
                           : std::make_unique<Syncer>(static_cast<int>(l), book, transport, local_server,
                                                      params[l], options.timeout, failure));
  }
  layer_of_key_.resize(book.pairs().size());
  for (const auto& kv : book.pairs()) layer_of_key_[kv.key] = static_cast<std::uint32_t>(kv.layer);
}

Client::~Client() { pool_.shutdown(); }

void Client::gradientsReady(int layer, std::vector<float*> grads) {
  POSEIDON_ENFORCE(layer >= 0 && layer < static_cast<int>(syncers_.size()), "no layer ", layer);
  if (reported_[layer]) {
    throw Error(detail::cat("layer ", layer, " reported its gradient twice in iteration ", iteration_,
                            "; call step() after every backward pass"));
  }
  reported_[layer] = true;
  deferred_[layer] = std::move(grads);
  if (options_.wfbp) startSync(layer);
}

void Client::startSync(int layer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    POSEIDON_ENFORCE(complete_[layer], "layer ", layer, " started a sync while its previous one runs");
    complete_[layer] = false;
  }
  Syncer* syncer = syncers_[layer].get();
  std::vector<float*> grads = std::move(deferred_[layer]);
  const std::uint64_t t = iteration_;
  if (syncer == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    complete_[layer] = true;
    return;
  }
  pool_.schedule([this, syncer, grads = std::move(grads), t] {
    syncer->Send(t, grads);
    syncer->Receive(t);
    syncer->Move(t);
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
  if (!options_.wfbp) {
    // Top layer first, as back-propagation would have produced them.
    for (int l = static_cast<int>(syncers_.size()) - 1; l >= 0; --l) startSync(l);
  }
  reported_.assign(reported_.size(), false);
  ++iteration_;
}

void Client::waitLayer(int layer) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(lock, cv_, [&] { return complete_[layer]; }, options_.timeout, &failure_,
          detail::cat("rank ", transport_.rank(), ": sync of layer '", book_.model().layers[layer].name,
                      "' for iteration ", iteration_ - 1));
}

void Client::waitAll() {
  for (std::size_t l = 0; l < syncers_.size(); ++l) waitLayer(static_cast<int>(l));
}

void Client::onParams(Message message) {
  const auto& h = message.header();
  if (h.key >= layer_of_key_.size()) {
    throw CommError(detail::cat("rank ", h.source, " sent values for KV pair ", h.key, ", which does not exist"));
  }
  syncers_[layer_of_key_[h.key]]->deliver(h.key, h.iteration, std::move(message));
}

void Client::onLocalFresh(std::uint32_t key, std::uint64_t version) {
  syncers_[layer_of_key_[key]]->deliver(key, version, Message());
}

std::uint64_t Client::bytesSentForLayer(int layer) const {
  return syncers_[layer] ? syncers_[layer]->bytesSent() : 0;
}

}  // namespace poseidon
