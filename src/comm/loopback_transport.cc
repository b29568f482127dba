#include "comm/loopback_transport.h"

#include <pthread.h>

#include <algorithm>
#include <string>

#include "poseidon/errors.h"

namespace poseidon {

LoopbackHub::LoopbackHub(int ranks) {
  POSEIDON_ENFORCE(ranks > 0);
  for (int r = 0; r < ranks; ++r) transports_.push_back(std::make_unique<LoopbackTransport>(*this, r));
}

LoopbackHub::~LoopbackHub() {
  for (auto& t : transports_) t->stop();
}

Transport& LoopbackHub::transport(int rank) { return *transports_.at(rank); }

LoopbackTransport::LoopbackTransport(LoopbackHub& hub, int rank) : hub_(hub), rank_(rank) {}

LoopbackTransport::~LoopbackTransport() { stop(); }

void LoopbackTransport::start(TransportCallbacks callbacks) {
  POSEIDON_ENFORCE(!thread_.joinable(), "transport started twice");
  traffic().resize(size());
  callbacks_ = std::move(callbacks);
  thread_ = std::thread([this] { runLoop(); });
}

std::shared_ptr<Work> LoopbackTransport::send(int peer, Message message) {
  if (peer < 0 || peer >= size()) {
    throw CommError(detail::cat("send to rank ", peer, " but the job has ", size(), " ranks"));
  }
  auto work = std::make_shared<Work>(detail::cat("loopback send to rank ", peer));
  traffic().countSend(peer, message.wireBytes());
  hub_.transports_[peer]->deliver(message.toContiguous());
  work->markDone();
  return work;
}

void LoopbackTransport::deliver(Message message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(std::move(message));
  }
  cv_.notify_one();
}

void LoopbackTransport::runLoop() {
  const std::string name = "loopback-" + std::to_string(rank_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !inbox_.empty(); });
    if (inbox_.empty()) return;  // stopping and drained
    Message m = std::move(inbox_.front());
    inbox_.pop_front();
    lock.unlock();
    try {
      callbacks_.on_message(std::move(m));
    } catch (...) {
      if (callbacks_.on_error) callbacks_.on_error(std::current_exception());
    }
    lock.lock();
  }
}

CollectiveChannel LoopbackTransport::newCollectiveChannel(const std::vector<int>* members,
                                                          std::chrono::milliseconds timeout) {
  CollectiveChannel channel;
  channel.traffic = &traffic();
  std::lock_guard<std::mutex> lock(hub_.mu_);
  if (members == nullptr) {
    // The n-th channel of every rank meets at the hub's n-th rendezvous.
    if (communicators_ == hub_.rendezvous_.size()) {
      hub_.rendezvous_.push_back(std::make_shared<LoopbackRendezvous>(size(), timeout));
    }
    channel.rendezvous = hub_.rendezvous_[communicators_++];
    channel.rank = rank_;
    return channel;
  }
  const auto me = std::find(members->begin(), members->end(), rank_);
  if (me == members->end()) throw CommError(detail::cat("rank ", rank_, " made a communicator of a group without it"));
  auto& all = hub_.group_rendezvous_[*members];
  std::size_t& mine = group_communicators_[*members];
  if (mine == all.size())
    all.push_back(std::make_shared<LoopbackRendezvous>(static_cast<int>(members->size()), timeout));
  channel.rendezvous = all[mine++];
  channel.rank = static_cast<int>(me - members->begin());
  return channel;
}

void LoopbackTransport::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace poseidon
