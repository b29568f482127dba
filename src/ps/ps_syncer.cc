#include "ps/ps_syncer.h"

#include <algorithm>
#include <cstring>

#include "comm/factors.h"
#include "comm/gradient16.h"
#include "common/digest.h"
#include "coordinator/cost_model.h"
#include "poseidon/errors.h"
#include "ps/parameter_server.h"

namespace poseidon {

PsSyncer::PsSyncer(int layer, const InformationBook& book, Transport& transport, ParameterServer* local_shard,
                   std::vector<float*> params, const FailureState& failure, const PsSyncerOptions& options)
    : LayerSyncer(layer, schemeName(options.factor_push ? Scheme::kFactorPush : Scheme::kPS)),
      book_(book),
      transport_(transport),
      local_shard_(local_shard),
      local_by_message_(options.local_by_message),
      params_(std::move(params)),
      timeout_(options.timeout),
      failure_(failure),
      keys_(book.pairsOfLayer(layer)),
      staleness_(options.staleness),
      into_gradients_(options.into_gradients),
      factor_push_(options.factor_push),
      wire_(options.wire),
      error_feedback_(options.error_feedback && options.wire != WireFormat::kFp32),
      updates_(options.updates),
      rounded_(keys_.size()),
      slots_(keys_.size(), Slot{options.start_iteration, Message()}),
      awaited_(options.start_iteration + 1) {
  // Sized now: a checkpoint restores into them before the first push.
  for (std::size_t pos = 0; error_feedback_ && pos < keys_.size(); ++pos) {
    residual_.emplace_back(static_cast<std::size_t>(book.pair(keys_[pos]).length));
  }
}

void PsSyncer::expect(std::uint64_t iteration) {
  std::lock_guard<std::mutex> lock(mu_);
  awaited_ = iteration + 1;
  fresh_ = 0;
  // At or past: with straggler dropping a step can go ahead while this worker still computes.
  for (const auto& s : slots_) fresh_ += s.version >= awaited_ ? 1 : 0;
}

LayerSyncer::SendFn PsSyncer::gradientsReady(std::uint64_t t, std::vector<float*> grads,
                                             std::shared_ptr<const void> owner) {
  if (factor_push_) refuse("dense gradient (it pushes factors)");
  return [this, t, grads = std::move(grads), owner = std::move(owner)] { Send(t, grads, owner); };
}

LayerSyncer::SendFn PsSyncer::factorsReady(std::uint64_t t, const float* U, const float* V, std::int64_t K) {
  if (!factor_push_) refuse("sufficient factors");
  // Packed now: the engine's factor tensors may be gone by the time the sync runs.
  auto message = std::make_shared<Message>(packFactors(t, U, V, K));
  return [this, t, message] { SendFactors(t, std::move(*message)); };
}

void PsSyncer::Send(std::uint64_t iteration, const std::vector<float*>& grads,
                    const std::shared_ptr<const void>& memory) {
  POSEIDON_ENFORCE_EQ(grads.size(), params_.size(), "gradients for layer ", layer());
  expect(iteration);
  const int me = transport_.rank();
  if (unused_before_ == iteration + 1) {
    grads_ = grads;  // Move clears them (server mode) or writes what the shards send back (gradient mode)
    sendUnused(iteration);
    return;
  }
  if (staleness_ > 0) {
    // SSP: the worker runs on at once, so the gradient is copied out and cleared now.
    for (std::uint32_t key : keys_) {
      const KVPair& kv = book_.pair(key);
      Message m = copyOfPush(key, iteration, grads[kv.tensor] + kv.offset);
      const int owner = book_.cluster().shardRank(kv.shard);
      if (owner != me) bytes_sent_ += m.wireBytes();
      transport_.send(owner, std::move(m.setPriority(layer())));
    }
    const auto& tensors = book_.model().layers[layer()].tensors;
    for (std::size_t t = 0; t < grads.size(); ++t) std::memset(grads[t], 0, tensors[t].numel() * sizeof(float));
    return;
  }
  grads_ = grads;
  for (std::uint32_t key : keys_) {
    const KVPair& kv = book_.pair(key);
    const float* src = grads[kv.tensor] + kv.offset;
    const int owner = book_.cluster().shardRank(kv.shard);
    if (owner == me && local_shard_ != nullptr && !local_by_message_) {
      local_shard_->pushLocal(key, iteration, wire_ != WireFormat::kFp32 ? roundedForShard(key, src) : src);
      continue;
    }
    if (wire_ != WireFormat::kFp32) {  // a 16-bit copy: the engine's gradient is free at once
      Message m = copyOfPush(key, iteration, src);
      bytes_sent_ += m.wireBytes();
      transport_.send(owner, std::move(m.setPriority(layer())));
      continue;
    }
    // Sent from the engine's gradient itself; Move waits for these sends before clearing it,
    // and a send still with the network when the session closes keeps it alive (`memory`).
    Message m = Message::makeExternal(MsgType::kPushGrad, key, static_cast<std::uint32_t>(me), iteration, src,
                                      static_cast<std::size_t>(kv.length) * sizeof(float), memory);
    bytes_sent_ += m.wireBytes();
    sends_.push_back(transport_.send(owner, std::move(m.setPriority(layer()))));
  }
}

void PsSyncer::sendUnused(std::uint64_t iteration) {
  const int me = transport_.rank();
  for (std::uint32_t key : keys_) {
    const int owner = book_.cluster().shardRank(book_.pair(key).shard);
    if (owner == me && local_shard_ != nullptr && !local_by_message_) {
      local_shard_->pushLocal(key, iteration, nullptr);
      continue;
    }
    Message m = Message::make(MsgType::kPushGrad, key, static_cast<std::uint32_t>(me), iteration, 0);
    bytes_sent_ += m.wireBytes();
    transport_.send(owner, std::move(m.setPriority(layer())));
  }
}

Message PsSyncer::copyOfPush(std::uint32_t key, std::uint64_t iteration, const float* src) {
  const auto n = static_cast<std::size_t>(book_.pair(key).length);
  const auto me = static_cast<std::uint32_t>(transport_.rank());
  if (wire_ != WireFormat::kFp32) {
    if (!error_feedback_) return packHalf(MsgType::kPushGrad16, wire_, key, me, iteration, src, n);
    Residual& residual = residual_[key - keys_.front()];
    std::lock_guard<std::mutex> lock(feedback_mu_);
    // The residual keeps what the shard will read short of the carried values, chunk by chunk.
    return packHalfReading(MsgType::kPushGrad16, wire_, key, me, iteration, residual.carry(src), n,
                           [&](std::size_t from, const float* read, std::size_t m) { residual.keep(from, read, m); });
  }
  Message m = Message::make(MsgType::kPushGrad, key, me, iteration, n * sizeof(float));
  std::memcpy(m.floats(), src, n * sizeof(float));
  return m;
}

const float* PsSyncer::roundedForShard(std::uint32_t key, const float* src) {
  const std::size_t pos = key - keys_.front();
  auto& rounded = rounded_[pos];
  rounded.resize(static_cast<std::size_t>(book_.pair(key).length));
  if (!error_feedback_) {
    roundThrough(wire_, src, rounded.data(), rounded.size());
    return rounded.data();
  }
  std::lock_guard<std::mutex> lock(feedback_mu_);
  roundThrough(wire_, residual_[pos].carry(src), rounded.data(), rounded.size());
  residual_[pos].keep(rounded.data());
  return rounded.data();
}

void PsSyncer::addStateRecords(std::vector<StateRecord>& records) {
  for (std::size_t pos = 0; pos < residual_.size(); ++pos) {
    records.push_back(StateRecord{detail::cat("ef/pair", keys_[pos], "/push"), residual_[pos].data(),
                                  residual_[pos].size() * sizeof(float)});
  }
}

Message PsSyncer::packFactors(std::uint64_t iteration, const float* U, const float* V, std::int64_t K) const {
  const LayerInfo& info = book_.model().layers[layer()];
  return poseidon::packFactors(MsgType::kPushFactors, layer(), transport_.rank(), iteration, U, V, K, info.M, info.N);
}

void PsSyncer::SendFactors(std::uint64_t iteration, Message factors) {
  expect(iteration);
  grads_.clear();  // nothing of the engine's to clear: autograd computed no weight gradient
  factors.setPriority(layer());
  std::vector<bool> sent(book_.cluster().ranks(), false);
  for (std::uint32_t key : keys_) {
    const int owner = book_.cluster().shardRank(book_.pair(key).shard);
    if (sent[owner]) continue;
    sent[owner] = true;
    if (owner == transport_.rank() && local_shard_ != nullptr && !local_by_message_) {
      local_shard_->onPushFactors(factors);
    } else {
      bytes_sent_ += factors.wireBytes();
      transport_.send(owner, factors);
    }
  }
}

void PsSyncer::deliver(Message message) {
  if (message.type() != MsgType::kParams && message.type() != MsgType::kParams16 &&
      message.type() != MsgType::kMeanGrad16) {
    LayerSyncer::deliver(std::move(message));
    return;
  }
  const auto key = message.pair();
  const auto version = message.header().iteration;
  store(key, version, std::move(message));
}

void PsSyncer::addToDigest(Digest& digest) const {
  if (updates_ == WireFormat::kFp32) return;  // fp32 values back: the servers' copies, nothing to compare
  const auto& tensors = book_.model().layers[layer()].tensors;
  for (std::size_t t = 0; t < params_.size(); ++t) {
    digest.update(params_[t], static_cast<std::size_t>(tensors[t].numel()) * sizeof(float));
  }
}

void PsSyncer::localFresh(std::uint32_t key, std::uint64_t version) { store(key, version, Message()); }

void PsSyncer::store(std::uint32_t key, std::uint64_t version, Message message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t pos = key - keys_.front();
    if (pos >= slots_.size()) {
      throw CommError(detail::cat("fresh values for KV pair ", key, " reached the syncer of layer ", layer()));
    }
    const auto n = static_cast<std::size_t>(book_.pair(key).length);
    const bool update = !message.empty() && message.type() == MsgType::kParams16;
    const bool half = update || (!message.empty() && message.type() == MsgType::kMeanGrad16);
    if (!message.empty() && !half && message.floatCount() != n) {
      throw CommError(detail::cat("fresh values for KV pair ", key, " carry ", message.floatCount(),
                                  " floats, the information book says ", n));
    }
    // An update adds onto the values before it: Move applies each one (BSP, no reads between).
    if (half && message.payloadBytes() != halfPayloadBytes(n)) {
      throw CommError(detail::cat("16 bits of KV pair ", key, " carry ", message.payloadBytes(), " bytes, not the ",
                                  halfPayloadBytes(n), " of its ", n, " values"));
    }
    // Each 16-bit kind only where the shards send it: updates in server mode, mean gradients in gradient mode.
    if (half && (updates_ == WireFormat::kFp32 || update == into_gradients_)) {
      const bool fp32 = updates_ == WireFormat::kFp32;
      const std::string takes = staleness_ > 0     ? "SSP reads"
                                : into_gradients_ ? (fp32 ? "fp32 mean gradients" : "16-bit mean gradients")
                                                  : (fp32 ? "fp32 values" : "16-bit updates");
      throw CommError(detail::cat("a 16-bit ", update ? "update" : "mean gradient", " of KV pair ", key,
                                  " reached a syncer that takes ", takes));
    }
    Slot& slot = slots_[pos];
    if (version != slot.version + 1) {
      throw CommError(detail::cat("KV pair ", key, ": fresh values of version ", version, " after version ",
                                  slot.version, " (BSP allows only the next)"));
    }
    if (!slot.message.empty() && slot.message.type() == MsgType::kParams16) {
      // Replacing it would lose an update for good (values are only replaced by newer ones).
      throw CommError(detail::cat("KV pair ", key, ": update ", version, " came before Move applied update ",
                                  slot.version));
    }
    slot.version = version;
    slot.message = std::move(message);
    if (version == awaited_) ++fresh_;
  }
  cv_.notify_all();
}

void PsSyncer::Receive(std::uint64_t iteration) {
  std::unique_lock<std::mutex> lock(mu_);
  try {
    waitFor(
        lock, cv_, [&] { return fresh_ == static_cast<int>(slots_.size()); }, timeout_, &failure_,
        detail::cat("rank ", transport_.rank(), ": fresh parameters of layer '", book_.model().layers[layer()].name,
                    "' for iteration ", iteration));
  } catch (const TimeoutError& e) {
    throwNamingCulprits(e, iteration);
  }
}

void PsSyncer::explainTimeout(const TimeoutError& e, std::uint64_t iteration) const {
  std::lock_guard<std::mutex> lock(mu_);
  throwNamingCulprits(e, iteration);
}

void PsSyncer::throwNamingCulprits(const TimeoutError& e, std::uint64_t iteration) const {
  // The client's wait rethrows a layer's error from the shared failure flag: it is already
  // explained, and naming the culprits again would say it twice.
  if (const auto* named = dynamic_cast<const CulpritTimeout*>(&e)) throw *named;
  // The likely culprits: the workers this rank's own shard has heard nothing from, and the
  // shards (other ranks) whose fresh values for the iteration never came.
  const std::vector<int> behind = local_shard_ ? local_shard_->workersBehind(iteration) : std::vector<int>();
  std::vector<bool> silent(book_.cluster().ranks(), false);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const int owner = book_.cluster().shardRank(book_.pair(keys_[i]).shard);
    if (slots_[i].version <= iteration && owner != transport_.rank()) silent[owner] = true;
  }
  std::string why;
  if (!behind.empty()) {
    std::string who;
    for (int w : behind) who += detail::cat(who.empty() ? "" : ", ", w);
    why += detail::cat("; rank", behind.size() > 1 ? "s " : " ", who, " sent no update for iteration ", iteration);
  }
  std::string shards;
  int silent_shards = 0;
  for (std::size_t r = 0; r < silent.size(); ++r) {
    if (silent[r]) shards += detail::cat(silent_shards++ ? ", " : "", r);
  }
  if (silent_shards) {
    why += detail::cat("; no fresh values from the shard", silent_shards > 1 ? "s on ranks " : " on rank ", shards);
  }
  if (why.empty()) throw e;
  // Every other worker silent at once points at this rank's own link, not at theirs.
  const bool names_worker = !behind.empty() && static_cast<int>(behind.size()) < book_.cluster().workers() - 1;
  throw CulpritTimeout(detail::cat(e.what(), why, " (lost or stalled)"), names_worker);
}

void PsSyncer::beforeRead(std::uint64_t version, std::uint64_t t) {
  if (staleness_ == 0) return;  // BSP: Move brought the values in
  std::vector<Message> arrived(keys_.size());
  std::uint64_t oldest = UINT64_MAX;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto fresh = [&] {
      for (const auto& s : slots_) {
        if (s.version < version) return false;
      }
      return true;
    };
    try {
      waitFor(lock, cv_, fresh, timeout_, &failure_,
              detail::cat("rank ", transport_.rank(), ": parameters of layer '", book_.model().layers[layer()].name,
                          "' with the updates of iterations before ", version, " (staleness ", staleness_, ")"));
    } catch (const TimeoutError& e) {
      throwNamingCulprits(e, version - 1);
    }
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      arrived[i] = std::move(slots_[i].message);
      oldest = std::min(oldest, slots_[i].version);
    }
  }
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (arrived[i].empty()) continue;
    const KVPair& kv = book_.pair(keys_[i]);
    std::memcpy(params_[kv.tensor] + kv.offset, arrived[i].floats(), kv.length * sizeof(float));
  }
  // How many iterations' updates this read lacks: t - oldest; the bound says at most s.
  if (!slots_.empty() && t > oldest) {
    std::uint64_t seen = max_staleness_.load();
    while (t - oldest > seen && !max_staleness_.compare_exchange_weak(seen, t - oldest)) {
    }
  }
}

void PsSyncer::Move(std::uint64_t iteration) {
  std::vector<Message> arrived(keys_.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < slots_.size(); ++i) arrived[i] = std::move(slots_[i].message);
  }
  // Our sends read the gradient; they are done (a shard cannot have stepped without
  // them, so these waits are over at once), and the gradient may change.
  for (auto& w : sends_) w->wait(timeout_);
  sends_.clear();
  const std::vector<float*>& into = into_gradients_ ? grads_ : params_;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (arrived[i].empty()) continue;  // the local shard updated the engine memory in place
    const KVPair& kv = book_.pair(keys_[i]);
    if (arrived[i].type() == MsgType::kParams16) {  // old + the shard's rounded update, as the shard holds
      addUnpacked(arrived[i], into[kv.tensor] + kv.offset, static_cast<std::size_t>(kv.length));
      continue;
    }
    if (arrived[i].type() == MsgType::kMeanGrad16) {  // the one rounded mean every worker reads
      unpackHalf(arrived[i], into[kv.tensor] + kv.offset, static_cast<std::size_t>(kv.length));
      continue;
    }
    std::memcpy(into[kv.tensor] + kv.offset, arrived[i].floats(), kv.length * sizeof(float));
  }
  if (into_gradients_) return;  // the mean gradient stays for the user's optimizer
  // Cleared here, off the compute thread, instead of by a zero_grad before the next
  // forward: the gradient is consumed.
  const auto& tensors = book_.model().layers[layer()].tensors;
  for (std::size_t t = 0; t < grads_.size(); ++t) std::memset(grads_[t], 0, tensors[t].numel() * sizeof(float));
}

}  // namespace poseidon
