// In-process loopback transport: N ranks as N threads of one process, for unit tests.
// Each rank has an inbox and a delivery thread, so handlers run on a transport thread
// exactly as they do over MPI.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/transport.h"

namespace poseidon {

class LoopbackTransport;
class LoopbackRendezvous;

// Owns the inboxes of all ranks; create one hub per simulated job.
class LoopbackHub {
 public:
  explicit LoopbackHub(int ranks);
  ~LoopbackHub();
  int size() const { return static_cast<int>(transports_.size()); }
  // The transport of one rank; the hub keeps ownership.
  Transport& transport(int rank);

 private:
  friend class LoopbackTransport;
  std::vector<std::unique_ptr<LoopbackTransport>> transports_;
  std::mutex mu_;
  std::vector<std::shared_ptr<LoopbackRendezvous>> rendezvous_;  // guarded by mu_; by creation order
  // guarded by mu_: the same for groups of ranks, by members
  std::map<std::vector<int>, std::vector<std::shared_ptr<LoopbackRendezvous>>> group_rendezvous_;
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackHub& hub, int rank);
  ~LoopbackTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  void start(TransportCallbacks callbacks) override;
  std::shared_ptr<Work> send(int peer, Message message) override;
  CollectiveChannel newCollectiveChannel(const std::vector<int>* members, std::chrono::milliseconds timeout) override;
  void stop() override;

 private:
  void deliver(Message message);
  void runLoop();

  LoopbackHub& hub_;
  const int rank_;
  std::size_t communicators_ = 0;                                // created by this rank so far
  std::map<std::vector<int>, std::size_t> group_communicators_;  // the same, by group
  TransportCallbacks callbacks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> inbox_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  std::thread thread_;
};

}  // namespace poseidon
