#include "ps/parameter_server.h"

#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "comm/gradient16.h"
#include "poseidon/errors.h"
#include "poseidon/state_record.h"
#include "poseidon/timeline.h"
#include "update/reconstruct.h"

namespace poseidon {

ParameterServer::ParameterServer(const InformationBook& book, Transport& transport, const SgdOptions& options,
                                 const std::function<float*(const KVPair&)>& storage,
                                 std::function<void(std::uint32_t, std::uint64_t)> on_local_fresh,
                                 FailureState& failure, const ServerConfig& config)
    : book_(book),
      transport_(transport),
      shard_(book, book.cluster().shardOf(transport.rank()), options, storage, config.start_iteration,
             config.staleness),
      on_local_fresh_(std::move(on_local_fresh)),
      failure_(failure),
      layer_bytes_(new std::atomic<std::uint64_t>[book.model().layers.size()]()),
      timeout_(config.timeout),
      straggler_timeout_(config.straggler_timeout),
      local_by_message_(config.local_by_message),
      values_owner_(config.values_owner),
      update_wire_(config.update_wire),
      mean_gradients_(options.gradient_only),
      error_feedback_(config.error_feedback && config.update_wire != WireFormat::kFp32),
      timeline_(config.timeline) {
  const std::uint64_t start_iteration = config.start_iteration;
  if (straggler_timeout_.count() > 0) shard_.allowDrops();
  pushed_through_.assign(book.cluster().workers(), start_iteration);
  // An empty shard (a tiny model over many ranks) is always complete.
  min_version_ = book.pairsOfShard(shard_.shard()).empty() ? UINT64_MAX : start_iteration;
  if (error_feedback_) {  // sized now: a checkpoint restores into them before the first step
    for (std::uint32_t key : book.pairsOfShard(shard_.shard())) {
      update_residual_.emplace(key, Residual(static_cast<std::size_t>(book.pair(key).length)));
    }
  }
  thread_ = std::thread([this] { runLoop(); });
}

void ParameterServer::addStateRecords(std::vector<StateRecord>& records) {
  shard_.addStateRecords(records);
  if (!error_feedback_) return;
  for (std::uint32_t key : book_.pairsOfShard(shard_.shard())) {
    Residual& r = update_residual_.at(key);
    records.push_back(StateRecord{detail::cat("ef/pair", key, "/update"), r.data(), r.size() * sizeof(float)});
  }
}

ParameterServer::~ParameterServer() { stop(); }

void ParameterServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ParameterServer::onPush(Message message) {
  const auto& h = message.header();
  const std::uint32_t pair = message.pair();
  const bool half = message.type() == MsgType::kPushGrad16;  // decoded on the server thread (runLoop)
  // An empty fp32 push says that no rank used the pair's layer this iteration.
  const bool unused = !half && message.payloadBytes() == 0;
  if ((!half && message.payloadBytes() % sizeof(float) != 0) || pair >= book_.pairs().size() ||
      (!half && !unused && message.floatCount() != static_cast<std::size_t>(book_.pair(pair).length))) {
    throw CommError(detail::cat("rank ", h.source, " pushed ", message.payloadBytes(), " bytes for KV pair ", pair,
                                ", which does not match the information book"));
  }
  Push p{pair, h.iteration, static_cast<int>(h.source), Contribution{unused ? nullptr : message.floats(), message},
         Message()};
  p.contribution.unused = unused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notePush(p.worker, p.iteration);
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

void ParameterServer::pushLocal(std::uint32_t key, std::uint64_t iteration, const float* grad) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    notePush(transport_.rank(), iteration);
    Push p{key, iteration, transport_.rank(), Contribution{grad, Message()}, Message()};
    p.contribution.unused = grad == nullptr;
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

void ParameterServer::onPushFactors(Message message) {
  const auto& h = message.header();
  const std::uint32_t layer = message.layer();
  const auto& layers = book_.model().layers;
  if (layer >= layers.size() || layers[layer].kind != LayerKind::kFC ||
      h.source >= static_cast<std::uint32_t>(book_.cluster().workers()) ||
      message.payloadBytes() % ((layers[layer].M + layers[layer].N) * sizeof(float)) != 0 ||
      message.payloadBytes() == 0) {
    throw CommError(detail::cat("rank ", h.source, " pushed malformed factors for layer ", layer));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    notePush(static_cast<int>(h.source), h.iteration);
    queue_.push_back(Push{layer, h.iteration, static_cast<int>(h.source), Contribution(), message});
  }
  cv_.notify_one();
}

void ParameterServer::applyFactors(const Push& p) {
  const LayerInfo& layer = book_.model().layers[p.key];
  const std::int64_t rows = static_cast<std::int64_t>(p.factors.floatCount()) / (layer.M + layer.N);
  const float* U = p.factors.floats();
  const float* V = U + rows * layer.M;
  for (std::uint32_t key : book_.pairsOfLayer(static_cast<int>(p.key))) {
    const KVPair& kv = book_.pair(key);
    if (kv.shard != shard_.shard()) continue;
    // The gradient slice lives in a message-shaped buffer, which the shard keeps alive.
    Message slice = Message::make(MsgType::kPushGrad, key, static_cast<std::uint32_t>(p.worker), p.iteration,
                                  static_cast<std::size_t>(kv.length) * sizeof(float));
    gradientSlice(U, V, rows, layer.M, layer.N, kv.tensor, kv.offset, kv.length, slice.floats());
    apply(Push{key, p.iteration, p.worker, Contribution{slice.floats(), slice}, Message()});
  }
}

void ParameterServer::readHalf(Push& p) const {
  const Message& pushed = p.contribution.keep_alive;
  p.contribution.half = halfSpanOf(pushed, static_cast<std::size_t>(book_.pair(p.key).length));
  p.contribution.data = nullptr;
}

void ParameterServer::notePush(int worker, std::uint64_t iteration) {
  if (worker >= 0 && worker < static_cast<int>(pushed_through_.size())) {
    pushed_through_[worker] = std::max(pushed_through_[worker], iteration + 1);
  }
}

std::vector<int> ParameterServer::workersBehind(std::uint64_t iteration) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> behind;
  for (int w = 0; w < static_cast<int>(pushed_through_.size()); ++w) {
    if (pushed_through_[w] <= iteration) behind.push_back(w);
  }
  return behind;
}

void ParameterServer::waitSends(std::uint32_t key) {
  // A step overwrites the values that the previous publish sends from: those sends must be
  // done. Every worker has received them (it pushed again), so this does not wait in practice.
  auto& sends = sends_[key];
  for (auto& w : sends) w->wait(timeout_);
  sends.clear();
}

void ParameterServer::apply(Push p) {
  bool ready = shard_.record(p.key, p.iteration, p.worker, std::move(p.contribution));
  late_.store(shard_.late());
  // Under SSP the next iterations' updates may all be in already: step through them.
  while (ready) {
    waitSends(p.key);
    const std::uint64_t version = shard_.version(p.key) + 1;
    TimelineSpan span(timeline_, "server",
                      timeline_
                          ? detail::cat("step ", book_.model().layers[book_.pair(p.key).layer].name, " pair ", p.key)
                          : std::string(),
                      "ps");
    stepPair(p.key, version);
    finishStep(p.key, version);
    ready = shard_.ready(p.key);
  }
}

void ParameterServer::dropStragglers() {
  for (std::uint32_t key : shard_.overdue(Clock::now() - straggler_timeout_)) {
    waitSends(key);
    const std::uint64_t version = shard_.version(key) + 1;
    stepPair(key, version);
    dropped_.store(shard_.dropped());
    finishStep(key, version);
  }
}

void ParameterServer::stepPair(std::uint32_t key, std::uint64_t version) {
  if (update_wire_ == WireFormat::kFp32) {
    shard_.step(key);
    return;
  }
  float* values = shard_.mutableValues(key);
  const auto n = static_cast<std::size_t>(book_.pair(key).length);
  Residual* residual = error_feedback_ ? &update_residual_.at(key) : nullptr;
  const auto me = static_cast<std::uint32_t>(transport_.rank());
  if (mean_gradients_) {  // the mean gradient itself, which every worker (this rank's too) reads from the message
    shard_.step(key);
    updates_[key] = residual == nullptr
                        ? packHalf(MsgType::kMeanGrad16, update_wire_, key, me, version, values, n)
                        : packHalfReading(MsgType::kMeanGrad16, update_wire_, key, me, version, residual->carry(values), n,
                                          [&](std::size_t from, const float* read, std::size_t m) {
                                            residual->keep(from, read, m);
                                          });
    return;
  }
  before_.assign(values, values + n);
  shard_.step(key);
  // The update, in the values' own memory until packed (the co-located worker reads none of
  // it before publish: BSP); each chunk becomes before + the update as read once packed.
  for (std::size_t i = 0; i < n; ++i) values[i] -= before_[i];
  // With error feedback the update carries what rounding the last one lost.
  const float* update = residual != nullptr ? residual->carry(values) : values;
  // The values every worker will hold: old + the update as it reads it, the same addition
  // as a worker's Move (addUnpacked); written chunk by chunk as each is packed.
  updates_[key] = packHalfReading(MsgType::kParams16, update_wire_, key, me, version, update, n,
                                  [&](std::size_t from, const float* read, std::size_t m) {
                                    if (residual != nullptr) residual->keep(from, read, m);
                                    for (std::size_t j = 0; j < m; ++j) values[from + j] = before_[from + j] + read[j];
                                  });
}

void ParameterServer::finishStep(std::uint32_t key, std::uint64_t version) {
  publish(key, version);
  if (completed_.size() <= version) completed_.resize(version + 1, 0);
  if (++completed_[version] == book_.pairsOfShard(shard_.shard()).size()) {
    std::lock_guard<std::mutex> guard(mu_);
    min_version_ = version;
  }
  version_cv_.notify_all();
}

void ParameterServer::publish(std::uint32_t key, std::uint64_t iteration) {
  const KVPair& kv = book_.pair(key);
  const auto& cluster = book_.cluster();
  const int me = transport_.rank();
  // Sent from the shard's values themselves to every remote worker; apply() waits for these
  // sends before the pair's next step changes the values. A 16-bit update is a copy.
  Message fresh = update_wire_ != WireFormat::kFp32
                      ? updates_.at(key)
                      : Message::makeExternal(MsgType::kParams, key, static_cast<std::uint32_t>(me), iteration,
                                              shard_.values(key),
                                              static_cast<std::size_t>(kv.length) * sizeof(float), values_owner_);
  fresh.setPriority(kv.layer);  // the next forward needs the lower layers first
  auto& sends = sends_[key];
  for (int w = 0; w < cluster.workers(); ++w) {
    if (w == me && !local_by_message_) continue;
    sends.push_back(transport_.send(w, fresh));
    if (w != me) layer_bytes_[kv.layer] += fresh.wireBytes();
  }
  if (cluster.isWorker(me) && !local_by_message_) on_local_fresh_(key, iteration);
}

void ParameterServer::waitVersion(std::uint64_t iterations, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, version_cv_, [&] { return min_version_ >= iterations; }, timeout, &failure_,
      detail::cat("shard on rank ", transport_.rank(), " completing iteration ", iterations));
}

void ParameterServer::runLoop() {
  pthread_setname_np(pthread_self(), "poseidon-server");
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const auto ready = [&] { return stopping_ || !queue_.empty(); };
    const auto oldest = straggler_timeout_.count() > 0 ? shard_.oldestWaiting() : std::nullopt;
    if (oldest) {
      // A step is waiting for a late worker: wake at its deadline to go ahead without it.
      if (!cv_.wait_until(lock, *oldest + straggler_timeout_, ready)) {
        lock.unlock();
        try {
          dropStragglers();
        } catch (...) {
          failure_.set(std::current_exception());
        }
        lock.lock();
        continue;
      }
    } else {
      cv_.wait(lock, ready);
    }
    if (queue_.empty()) return;
    Push p = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      const Message& pushed = p.contribution.keep_alive;  // empty for the local worker's push in place
      if (!pushed.empty() && pushed.type() == MsgType::kPushGrad16) readHalf(p);
      if (p.factors.empty()) {
        apply(std::move(p));
      } else {
        applyFactors(p);
      }
    } catch (...) {
      failure_.set(std::current_exception());
    }
    lock.lock();
  }
}

}  // namespace poseidon
