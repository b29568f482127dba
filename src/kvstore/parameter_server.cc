#include "kvstore/parameter_server.h"

#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "poseidon/errors.h"
#include "sfb/reconstruct.h"

namespace poseidon {

ParameterServer::ParameterServer(const InformationBook& book, Transport& transport, const SgdOptions& options,
                                 const std::function<float*(const KVPair&)>& storage,
                                 std::function<void(std::uint32_t, std::uint64_t)> on_local_fresh,
                                 FailureState& failure, std::chrono::milliseconds timeout,
                                 std::uint64_t start_iteration)
    : book_(book),
      transport_(transport),
      shard_(book, book.cluster().shardOf(transport.rank()), options, storage, start_iteration),
      on_local_fresh_(std::move(on_local_fresh)),
      failure_(failure),
      layer_bytes_(new std::atomic<std::uint64_t>[book.model().layers.size()]()),
      timeout_(timeout) {
  // An empty shard (a tiny model over many ranks) is always complete.
  min_version_ = book.pairsOfShard(shard_.shard()).empty() ? UINT64_MAX : start_iteration;
  thread_ = std::thread([this] { runLoop(); });
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
  if (message.payloadBytes() % sizeof(float) != 0 || h.key >= book_.pairs().size() ||
      message.floatCount() != static_cast<std::size_t>(book_.pair(h.key).length)) {
    throw CommError(detail::cat("rank ", h.source, " pushed ", message.payloadBytes(), " bytes for KV pair ",
                                h.key, ", which does not match the information book"));
  }
  Push p{h.key, h.iteration, static_cast<int>(h.source), Contribution{message.floats(), message}, Message()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

void ParameterServer::pushLocal(std::uint32_t key, std::uint64_t iteration, const float* grad) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Push{key, iteration, transport_.rank(), Contribution{grad, Message()}, Message()});
  }
  cv_.notify_one();
}

void ParameterServer::onPushFactors(Message message) {
  const auto& h = message.header();
  const auto& layers = book_.model().layers;
  if (h.key >= layers.size() || layers[h.key].kind != LayerKind::kFC || h.source >= static_cast<std::uint32_t>(book_.cluster().workers()) ||
      message.payloadBytes() % ((layers[h.key].M + layers[h.key].N) * sizeof(float)) != 0 || message.payloadBytes() == 0) {
    throw CommError(detail::cat("rank ", h.source, " pushed malformed factors for layer ", h.key));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Push{h.key, h.iteration, static_cast<int>(h.source), Contribution(), message});
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

void ParameterServer::apply(Push p) {
  if (shard_.missing(p.key) == 1) {
    // This push completes the pair and its step will overwrite the values: the previous
    // sends of them must be done. Every worker has received them (it pushed again), so
    // this does not wait in practice.
    auto& sends = sends_[p.key];
    for (auto& w : sends) w->wait(timeout_);
    sends.clear();
  }
  if (!shard_.push(p.key, p.iteration, p.worker, std::move(p.contribution))) return;
  publish(p.key, p.iteration + 1);
  const std::uint64_t version = p.iteration + 1;
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
  // sends before the pair's next step changes the values.
  const Message fresh = Message::makeExternal(MsgType::kParams, key, static_cast<std::uint32_t>(me), iteration,
                                              shard_.values(key), static_cast<std::size_t>(kv.length) * sizeof(float));
  auto& sends = sends_[key];
  for (int w = 0; w < cluster.workers(); ++w) {
    if (w == me) continue;
    sends.push_back(transport_.send(w, fresh));
    layer_bytes_[kv.layer] += fresh.wireBytes();
  }
  if (cluster.isWorker(me)) on_local_fresh_(key, iteration);
}

void ParameterServer::waitVersion(std::uint64_t iterations, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(lock, version_cv_, [&] { return min_version_ >= iterations; }, timeout, &failure_,
          detail::cat("shard on rank ", transport_.rank(), " completing iteration ", iterations));
}

void ParameterServer::runLoop() {
  pthread_setname_np(pthread_self(), "poseidon-server");
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Push p = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
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
