#include "allreduce/funnel_kvstore.h"

#include <pthread.h>

#include "allreduce/communicators.h"
#include "comm/transport.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"

namespace poseidon {

FunnelKVStore::FunnelKVStore(const KVStoreOptions& options, Engine& engine, Transport& transport, FailureState& failure)
    : KVStore(options, engine), comm_(newCommunicator(transport, options.timeout, failure)), failure_(failure) {}

FunnelKVStore::~FunnelKVStore() { stop(); }

void FunnelKVStore::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FunnelKVStore::issue(int key, Entry& e, Collective collective, Engine::Tag grad_tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The keys are known once pushes begin: init() is over.
    if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { runLoop(); });
  }
  engine_.pushAsync(
      [this, key, collective = std::move(collective)](Engine::Done done) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          POSEIDON_ENFORCE(requests_.count(key) == 0, "funnel: key ", key, " pushed twice in one round");
          requests_[key] = Request{collective, std::move(done)};
        }
        cv_.notify_all();
      },
      {grad_tag}, {e.tag}, Engine::Kind::kComm);
}

void FunnelKVStore::runLoop() {
  pthread_setname_np(pthread_self(), "kv-funnel");
  std::vector<int> keys;
  for (const auto& [key, e] : entries_) keys.push_back(key);  // ascending
  try {
    while (true) {
      for (int key : keys) {
        Request r;
        {
          std::unique_lock<std::mutex> lock(mu_);
          // No deadline here: between training iterations nothing is pushed for as long as
          // the program likes; the waits on the results carry the timeouts.
          cv_.wait(lock, [&] { return stopping_ || requests_.count(key) > 0; });
          if (stopping_) return;
          r = std::move(requests_[key]);
          requests_.erase(key);
        }
        {
          TimelineSpan span(options_.timeline, "funnel", options_.timeline ? detail::cat("allreduce key ", key) : "",
                            "allreduce");
          r.collective.run(*comm_, options_.wire);
        }
        r.done();
      }
    }
  } catch (...) {
    failure_.set(std::current_exception());
  }
}

}  // namespace poseidon
