#include "comm/loopback_transport.h"

#include <pthread.h>

#include <algorithm>
#include <string>

#include "allreduce/loopback_communicator.h"
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

std::unique_ptr<Communicator> LoopbackTransport::newCommunicator(std::chrono::milliseconds timeout,
                                                                 const FailureState&) {
  // The n-th communicator of every rank meets at the hub's n-th rendezvous.
  std::lock_guard<std::mutex> lock(hub_.mu_);
  if (communicators_ == hub_.rendezvous_.size()) {
    hub_.rendezvous_.push_back(std::make_shared<LoopbackRendezvous>(size(), timeout));
  }
  auto comm = std::make_unique<LoopbackCommunicator>(hub_.rendezvous_[communicators_++], rank_);
  comm->countInto(&traffic());
  return comm;
}

std::unique_ptr<Communicator> LoopbackTransport::newGroupCommunicator(const std::vector<int>& members,
                                                                      std::chrono::milliseconds timeout,
                                                                      const FailureState&) {
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end()) throw CommError(detail::cat("rank ", rank_, " made a communicator of a group without it"));
  std::lock_guard<std::mutex> lock(hub_.mu_);
  auto& all = hub_.group_rendezvous_[members];
  std::size_t& mine = group_communicators_[members];
  if (mine == all.size())
    all.push_back(std::make_shared<LoopbackRendezvous>(static_cast<int>(members.size()), timeout));
  auto comm = std::make_unique<LoopbackCommunicator>(all[mine++], static_cast<int>(me - members.begin()));
  comm->countInto(&traffic());
  return comm;
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
