// Transport over MPI point-to-point messages.
//
// Funneled: one progress thread issues every MPI call (MPI_Isend, MPI_Improbe +
// MPI_Imrecv or MPI_Mrecv + MPI_Irecv, MPI_Testsome), so MPI_THREAD_SERIALIZED is enough and no MPI call ever
// races another. Other threads only enqueue. The thread spins (yielding) while transfers
// are in flight and backs off to short sleeps when idle, because on an oversubscribed
// machine a busy-polling rank steals the core its neighbours compute on.
//
// Sends wait in the bandwidth manager's queue (bandwidth/send_queue.h): the thread hands
// MPI at most the policy's window of bytes at once, most urgent first, within the budget.
//
// It is also the rank's one MPI poller (mpi_request_poller.h): the communicators it makes
// hand it their collectives' requests, and it tests them with its own.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bandwidth/send_queue.h"
#include "bandwidth/token_bucket.h"
#include "comm/mpi_context.h"
#include "comm/mpi_request_poller.h"
#include "comm/transport.h"

namespace poseidon {

class MpiTransport final : public Transport, public MpiRequestPoller {
 public:
  // `max_payload_bytes` bounds what a received header may announce.
  MpiTransport(const MpiContext& mpi, std::size_t max_payload_bytes);
  // On a duplicate of the job's communicator, owned and freed here: a transport that may
  // live beside another (whose progress thread would otherwise take its messages).
  // Collective: every rank makes it together.
  struct OwnCommunicator {};
  MpiTransport(const MpiContext& mpi, std::size_t max_payload_bytes, OwnCommunicator);
  ~MpiTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void configure(const SendPolicy& policy) override;
  void setSameNode(const std::vector<bool>& same) override;
  void start(TransportCallbacks callbacks) override;
  std::shared_ptr<Work> send(int peer, Message message) override;
  CollectiveChannel newCollectiveChannel(const std::vector<int>* members, std::chrono::milliseconds timeout) override;
  void stop() override;
  void leave(const std::string& why) override;
  // False when stop() gave up on sends still in flight after kDrainTimeout (a peer that
  // stalled or lost its link never takes them): MPI_Finalize would wait for them too.
  bool drained() const override { return !abandoned_; }
  bool settle(std::chrono::milliseconds limit) override;
  SendQueueStats sendStats() const override;
  // A collective's request, completed by the progress thread while it runs.
  Outcome await(MPI_Request request, Clock::time_point until, const FailureState& failure,
                int& mpi_error) override;
  // Requests await() was handed that completed here: what the stress test checks.
  std::uint64_t awaitedCompleted() const { return awaited_completed_.load(); }
  static constexpr std::chrono::seconds kDrainTimeout{10};
  // MPI_Comm_create_group's tag (any value: its traffic is apart from the messages').
  static constexpr int kGroupTag = 7;
  // Leaving (Transport::leave): the leaver's notice, with its reason, and a peer's answer,
  // sent after everything it had sent the leaver. Apart from the messages' tags (their
  // types) and under the MPI standard's least MPI_TAG_UB.
  static constexpr int kLeavingTag = 30000;
  static constexpr int kLeftTag = 30001;
  // A message whose payload lives apart from its header (Message::makeExternal: a gradient
  // or a shard's values, sent from where they are) of kSplitBytes or more goes as two MPI
  // messages: its header, under its type's tag, then its payload under this tag. Two
  // contiguous sends, so MPI sends straight from the memory; a derived datatype makes
  // OpenMPI pack the payload into its own buffers first, a copy of every byte on the MPI
  // thread. The receiver, having the header, posts the payload's receive before it probes
  // again: MPI keeps one sender's messages in order. A smaller payload goes in one message
  // (a derived datatype): its copy costs less than a second message.
  static constexpr int kPayloadTag = 30002;
  static constexpr std::size_t kSplitBytes = 64 << 10;
  // The send of such a header: freed when done, the message's Work waits for the payload.
  static constexpr int kHeaderPartTag = 30003;
  static constexpr std::size_t kMaxReasonBytes = 1024;  // of a leaving notice's reason

 private:
  struct Outgoing {
    int peer;
    Message message;
    std::shared_ptr<Work> work;
    std::size_t window_bytes = 0;  // what it takes of the window once handed to MPI
  };
  using Clock = std::chrono::steady_clock;
  // A request handed over by await(): guarded by mu_ once shared.
  struct Awaited {
    MPI_Request request;
    bool done = false;            // completed
    int error = MPI_SUCCESS;      // once done: how
    bool ended = false;           // the progress thread ended first
    bool adopted = false;         // the progress thread took it (else, ended, it is still the waiter's)
    bool given_up = false;        // its waiter left (timeout or failure): stopping does not wait for it
  };
  struct InFlight {
    bool is_send;
    Message message;                         // a send keeps its bytes alive until done
    std::shared_ptr<Work> work;              // sends only; none for a header part (kHeaderPartTag)
    std::unique_ptr<std::uint8_t[]> buffer;  // receives, and the leaving notices and header parts sent
    std::size_t size = 0;                    // receives: bytes; sends: bytes counted in the window
    int tag = 0;                             // receives: a message's type, or kLeavingTag / kLeftTag
    int source = -1;                         // receives
    bool split = false;                      // a receive of a payload apart: its header is in buffer
    std::shared_ptr<Awaited> awaited{};      // another thread's request (await), and nothing else
  };

  void runLoop();
  void progressLoop();
  bool postSends();
  void post(Outgoing& out);
  // Header and payload as two messages (kSplitBytes or more, apart): the payload's request.
  MPI_Request postApart(const Outgoing& out, int tag);
  void recordWait(const SendQueue<Outgoing>::Entry& e, std::chrono::steady_clock::time_point now);  // mu_ held
  bool probeReceives();
  // The requests await() handed over since the last call, into the ones tested.
  bool adoptAwaited();
  // The progress thread ends: every request handed over and not done is told so.
  void endAwaited();
  // All that is in flight is requests whose waiters gave up: nothing to hurry for, or to
  // drain once stopping.
  bool onlyGivenUpLeft();
  // This transport's own messages in flight (not awaited requests): what stopping drains.
  bool ownInFlight() const;
  // A probed message of a header's size: the header, and the receive of its payload if one
  // follows apart (kPayloadTag).
  void receiveSplit(MPI_Message& handle, int source, int tag);
  // A payload received apart filled the size its header announced.
  bool payloadComplete(const MPI_Status& status, const InFlight& f);
  bool testInFlight();
  bool pastStopDeadline();
  // Leaving: this rank's notices to its peers, and what a peer's notice or answer does.
  void sayGoodbye();
  bool goodbyeSaid() const;  // mu_ held
  void postNotice(int peer, int tag, const std::string& text);
  void handleNotices();
  void onNotice(int peer, int tag, const std::string& why);
  void dropQueued(std::vector<SendQueue<Outgoing>::Entry> dropped, const std::string& why);
  bool awaitingAnswers() const;
  void check(int rc, const char* call);

  const MPI_Comm comm_;
  const bool owns_comm_ = false;
  const MPI_Comm groups_comm_;  // MpiContext::groupsComm()
  const bool thread_multiple_;
  const int rank_;
  const int size_;
  const std::size_t max_payload_bytes_;
  TransportCallbacks callbacks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  SendPolicy policy_;                                    // set before start()
  std::vector<bool> same_node_;                          // guarded by mu_: peers whose messages skip window and budget
  std::unique_ptr<TokenBucket> budget_;                  // shared with the collectives (thread-safe)
  SendQueue<Outgoing> outbox_{SendOrder::kPriority};     // guarded by mu_
  std::uint64_t pushes_ = 0;                             // sends and awaited requests queued so far; guarded by mu_
  SendQueueStats stats_;                                 // guarded by mu_
  bool stopping_ = false;                                // guarded by mu_
  std::chrono::steady_clock::time_point stop_deadline_;  // guarded by mu_
  std::size_t unsent_ = 0;                               // sends queued or in flight; guarded by mu_
  bool loop_ended_ = false;                              // the progress thread returned; guarded by mu_
  std::condition_variable sent_cv_;                      // unsent_ fell or the loop ended
  std::atomic<bool> abandoned_{false};
  bool leaving_ = false;                                 // guarded by mu_: leave() was called
  std::string leaving_why_;                              // guarded by mu_
  std::atomic<bool> goodbye_pending_{false};             // leave() was called and a peer is still to be told
  std::vector<bool> departed_;                           // guarded by mu_: peers that left (nothing goes to them)
  bool polling_ = false;                                 // guarded by mu_: the progress thread takes awaited requests
  std::vector<std::shared_ptr<Awaited>> awaited_;        // guarded by mu_: handed over, not yet tested
  std::condition_variable awaited_cv_;                   // an awaited request completed, or the loop ended
  std::atomic<std::uint64_t> awaited_completed_{0};
  std::atomic<bool> any_given_up_{false};               // a waiter ever gave up (a failing run)

  // Owned by the progress thread only.
  std::vector<MPI_Request> requests_;
  std::vector<InFlight> in_flight_;
  std::size_t window_bytes_in_flight_ = 0;  // network sends handed to MPI, not yet done
  std::uint64_t pushes_seen_ = 0;
  std::vector<bool> told_;             // peers sent this rank's leaving notice
  std::vector<bool> awaiting_answer_;  // peers told of this rank's leaving that have not answered
  struct Notice {
    int source;
    int tag;
    std::string why;
  };
  std::vector<Notice> notices_;  // received, not yet handled (handleNotices)
  std::thread thread_;
};

}  // namespace poseidon
