// The funnel design: engine tasks only hand their push to one MPI thread, which issues
// the collectives itself in a fixed order: ascending key, one round of every key after
// another. The order is the same on every rank by construction, at the price of
// head-of-line blocking: a key whose gradient is late holds up every key after it.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "allreduce/kvstore.h"

namespace poseidon {

class FunnelKVStore final : public KVStore {
 public:
  FunnelKVStore(const KVStoreOptions& options, Engine& engine, Transport& transport, FailureState& failure);
  ~FunnelKVStore() override;
  void stop() override;
  bool abandoned() const override { return comm_->abandoned(); }

 private:
  struct Request {
    Collective collective;
    Engine::Done done;
  };
  void issue(int key, Entry& entry, Collective collective, Engine::Tag grad_tag) override;
  Communicator& initCommunicator() override { return *comm_; }
  void runLoop();

  std::unique_ptr<Communicator> comm_;
  FailureState& failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Request> requests_;  // guarded by mu_: at most one per key and round
  bool stopping_ = false;            // guarded by mu_
  std::thread thread_;
};

}  // namespace poseidon
