// The transport interface (after gloo's transport/device.h): tagged asynchronous messages
// between ranks. The MPI transport and the in-process loopback transport plug in the same
// way, so every component above runs unchanged over either.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bandwidth/send_policy.h"
#include "comm/collective_channel.h"
#include "comm/message.h"
#include "comm/traffic.h"
#include "comm/work.h"

namespace poseidon {

struct TransportCallbacks {
  // Called on the transport's own thread for every incoming message; keep it short.
  std::function<void(Message)> on_message;
  // Called on the transport's thread when it can no longer deliver (bad bytes, MPI error).
  std::function<void(std::exception_ptr)> on_error;
  // Called on the transport's thread when a peer leaves the job (Transport::leave), with
  // its reason; nothing more goes to that peer.
  std::function<void(int, const std::string&)> on_peer_left;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // How sends are scheduled (order, budget, window); before start(). A transport that does
  // not schedule (the loopback one delivers at once) ignores it.
  virtual void configure(const SendPolicy& /*policy*/) {}
  // `same[r]`: rank r is on this rank's node, so messages to it never cross the network
  // and skip the bandwidth manager's window and budget (as messages to oneself do).
  virtual void setSameNode(const std::vector<bool>& /*same*/) {}
  // Begins delivering incoming messages. Called once, before any send.
  virtual void start(TransportCallbacks callbacks) = 0;
  // Queues `message` for `peer` and returns at once; the handle completes when the bytes
  // have left this process. Sending to oneself is allowed.
  virtual std::shared_ptr<Work> send(int peer, Message message) = 0;
  // The wiring of a new channel for collectives beside the messages, over all ranks
  // (`members` null) or over `members` (ranks, ascending; only they call it), ranked in that
  // order; allreduce/communicators.h builds a Communicator on it. Collective: every rank of
  // the channel makes the same number, in the same order. `timeout`: how long the loopback
  // rendezvous waits for its ranks (an MPI communicator is given its own by the caller).
  virtual CollectiveChannel newCollectiveChannel(const std::vector<int>* members, std::chrono::milliseconds timeout) = 0;
  // Completes queued sends and stops delivery. Idempotent; called before destruction.
  virtual void stop() = 0;
  // This rank is failing (`why`) and leaves the job before its peers: what it queued before
  // still goes (later sends fail), then it tells every peer to send nothing more here, and
  // (until stop() returns) goes on taking what they had sent already, so that none of their sends
  // is left waiting for a receiver that is gone, holding its memory (MPI cannot cancel a
  // send). The peers' sessions fail at once with `why` instead of running out their timeout.
  virtual void leave(const std::string& /*why*/) {}
  // False if stop() gave up on sends a peer never took (it waits a bounded time).
  virtual bool drained() const { return true; }
  // Waits up to `limit` until every send queued so far has left this process; then drops
  // those not yet handed to the network (their handles fail). True when none is left.
  // A session calls it as it closes, so that nothing of its goes out after it. False: some
  // sends are still with the network; their messages keep the memory they read alive.
  virtual bool settle(std::chrono::milliseconds /*limit*/) { return true; }

  // What the send queue did so far (messages, their waits).
  virtual SendQueueStats sendStats() const { return {}; }

  // Byte counters, per peer and per traffic class.
  TrafficCounters& traffic() { return traffic_; }

 private:
  TrafficCounters traffic_;
};

}  // namespace poseidon
