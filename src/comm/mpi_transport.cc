#include "comm/mpi_transport.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "comm/mpi_channel.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"

namespace poseidon {

namespace {
// Idle back-off of the progress thread: from 20 us up to 500 us between polls. The upper
// bound is the worst added latency for the first message after a quiet period.
constexpr auto kMinBackoff = std::chrono::microseconds(20);
constexpr auto kMaxBackoff = std::chrono::microseconds(500);
// Poll interval while sends or receives are in flight.
constexpr auto kInFlightPoll = std::chrono::microseconds(30);
// How often a thread in await() looks at the failure flag, which wakes nobody.
constexpr auto kAwaitFailureLook = std::chrono::milliseconds(20);
// What the budget lets go at once after a quiet period: one KV pair.
constexpr double kBudgetBurstBytes = 2 << 20;
}  // namespace

MpiTransport::MpiTransport(const MpiContext& mpi, std::size_t max_payload_bytes)
    : comm_(mpi.comm()),
      groups_comm_(mpi.groupsComm()),
      thread_multiple_(mpi.threadMultiple()),
      rank_(mpi.rank()),
      size_(mpi.size()),
      max_payload_bytes_(max_payload_bytes),
      budget_(std::make_unique<TokenBucket>(0, 0)) {
  POSEIDON_ENFORCE(max_payload_bytes_ + sizeof(MessageHeader) < static_cast<std::size_t>(INT_MAX),
                   "MPI counts are int: messages must stay under 2 GiB");
}

namespace {
MPI_Comm duplicate(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS) throw CommError("MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return dup;
}
}  // namespace

MpiTransport::MpiTransport(const MpiContext& mpi, std::size_t max_payload_bytes, OwnCommunicator)
    : comm_(duplicate(mpi.comm())),
      owns_comm_(true),
      groups_comm_(mpi.groupsComm()),
      thread_multiple_(mpi.threadMultiple()),
      rank_(mpi.rank()),
      size_(mpi.size()),
      max_payload_bytes_(max_payload_bytes),
      budget_(std::make_unique<TokenBucket>(0, 0)) {}

MpiTransport::~MpiTransport() {
  stop();
  if (owns_comm_ && !abandoned_) {
    MPI_Comm comm = comm_;
    MPI_Comm_free(&comm);
  }
  if (abandoned_) {
    // MPI still owns the requests it never completed (a peer that stalled or lost its link
    // never took them; MPI cannot cancel a send) and may read or write their buffers until
    // MPI_Finalize: those messages, and through their owners the memory they borrow, stay
    // until the job ends. The one place Poseidon keeps memory past its owner's end; a peer
    // that fails in an orderly way leaves (leave()) and leaves nothing in flight.
    static_cast<void>(new std::vector<InFlight>(std::move(in_flight_)));
  }
}

bool MpiTransport::pastStopDeadline() {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_ && std::chrono::steady_clock::now() >= stop_deadline_;
}

void MpiTransport::configure(const SendPolicy& policy) {
  POSEIDON_ENFORCE(!thread_.joinable(), "the send policy is set before the transport starts");
  policy_ = policy;
  budget_ = std::make_unique<TokenBucket>(policy.max_bytes_per_s, kBudgetBurstBytes);
  outbox_ = SendQueue<Outgoing>(policy.order);
}

SendQueueStats MpiTransport::sendStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void MpiTransport::start(TransportCallbacks callbacks) {
  POSEIDON_ENFORCE(!thread_.joinable(), "transport started twice");
  traffic().resize(size_);
  callbacks_ = std::move(callbacks);
  departed_.assign(size_, false);
  told_.assign(size_, false);
  awaiting_answer_.assign(size_, false);
  thread_ = std::thread([this] { runLoop(); });
}

void MpiTransport::setSameNode(const std::vector<bool>& same) {
  POSEIDON_ENFORCE_EQ(same.size(), static_cast<std::size_t>(size_), "ranks in the same-node map");
  std::lock_guard<std::mutex> lock(mu_);
  same_node_ = same;
}

std::shared_ptr<Work> MpiTransport::send(int peer, Message message) {
  if (peer < 0 || peer >= size_) {
    throw CommError(detail::cat("send to rank ", peer, " but the job has ", size_, " ranks"));
  }
  auto work = std::make_shared<Work>(detail::cat("MPI send to rank ", peer));
  const std::size_t bytes = message.wireBytes();
  const int priority = message.priority();
  {
    std::lock_guard<std::mutex> lock(mu_);
    POSEIDON_ENFORCE(!stopping_, "send after the transport stopped");
    if (leaving_ || (!departed_.empty() && departed_[peer])) {
      work->markDone(std::make_exception_ptr(CommError(
          leaving_ ? std::string("not sent: this rank is leaving the job") : detail::cat("not sent: rank ", peer,
                                                                                          " left the job"))));
      return work;
    }
    traffic().countSend(peer, bytes);
    const bool network =
        peer != rank_ && (same_node_.empty() || !same_node_[peer]) && !skipsSendWindow(message.type());
    outbox_.push(Outgoing{peer, std::move(message), work}, priority, bytes, network, Clock::now());
    ++unsent_;
    ++pushes_;
  }
  cv_.notify_one();
  return work;
}

CollectiveChannel MpiTransport::newCollectiveChannel(const std::vector<int>* members,
                                                     std::chrono::milliseconds /*timeout*/) {
  if (!thread_multiple_) {
    throw CommError(
        "this MPI library does not provide MPI_THREAD_MULTIPLE, which the allreduce scheme needs; "
        "choose the ps, sfb or auto scheme, without allreduce layers");
  }
  CollectiveChannel channel;
  channel.traffic = &traffic();
  channel.budget = budget_.get();
  channel.poller = this;
  if (members == nullptr) {
    channel.mpi = std::make_shared<MpiChannel>(MpiChannel{comm_, false});  // the Communicator duplicates it
    return channel;
  }
  // MPI_Comm_create_group is collective over the members only: the other ranks (a node's
  // devices) never call it. Not on comm_: the progress thread would take its messages.
  MPI_Group all = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm_group(groups_comm_, &all);
  MPI_Group_incl(all, static_cast<int>(members->size()), members->data(), &group);
  MPI_Comm sub = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(groups_comm_, group, kGroupTag, &sub);
  MPI_Group_free(&group);
  MPI_Group_free(&all);
  if (rc != MPI_SUCCESS || sub == MPI_COMM_NULL)
    throw CommError("MPI_Comm_create_group failed for the allreduce among leaders");
  channel.mpi = std::make_shared<MpiChannel>(MpiChannel{sub, true});
  return channel;
}

bool MpiTransport::settle(std::chrono::milliseconds limit) {
  std::vector<SendQueue<Outgoing>::Entry> dropped;
  {
    std::unique_lock<std::mutex> lock(mu_);
    sent_cv_.wait_for(lock, limit, [&] { return unsent_ == 0 || loop_ended_; });
    if (unsent_ == 0) return true;
    dropped = outbox_.takeAll();
    unsent_ -= dropped.size();
  }
  dropQueued(std::move(dropped), "not sent: the session closed first");
  std::lock_guard<std::mutex> lock(mu_);
  return unsent_ == 0;
}

// What was queued before goes first (an error this rank tells its peers on its way out,
// say), then the notices: MPI keeps one sender's messages in order.
void MpiTransport::leave(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_ || stopping_ || departed_.empty()) return;  // not started, or already going
    leaving_ = true;
    leaving_why_ = why.substr(0, kMaxReasonBytes);  // a peer's receive is bounded
    ++pushes_;  // wakes the progress thread, which says goodbye to each peer once nothing waits for it
    goodbye_pending_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void MpiTransport::dropQueued(std::vector<SendQueue<Outgoing>::Entry> dropped, const std::string& why) {
  if (dropped.empty()) return;
  const auto error = std::make_exception_ptr(CommError(why));
  for (auto& e : dropped) e.item.work->markDone(error);
}

// Each peer is told once nothing queued before leave() waits for it: a peer that holds up
// its own messages does not delay the others' notices.
void MpiTransport::sayGoodbye() {
  if (!goodbye_pending_.load(std::memory_order_acquire)) return;  // the progress loop's usual pass: no lock
  std::string why;
  std::vector<int> now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (goodbyeSaid()) {
      goodbye_pending_.store(false, std::memory_order_relaxed);
      return;
    }
    why = leaving_why_;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || departed_[p] || told_[p]) continue;
      if (!outbox_.any([p](const Outgoing& o) { return o.peer == p; })) now.push_back(p);
    }
  }
  for (int p : now) {
    postNotice(p, kLeavingTag, why);
    told_[p] = true;
    awaiting_answer_[p] = true;
  }
}

bool MpiTransport::goodbyeSaid() const {
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && !departed_[p] && !told_[p]) return false;
  }
  return true;
}

void MpiTransport::postNotice(int peer, int tag, const std::string& text) {
  auto bytes = std::unique_ptr<std::uint8_t[]>(new std::uint8_t[std::max<std::size_t>(1, text.size())]);
  std::copy(text.begin(), text.end(), bytes.get());
  MPI_Request req;
  check(MPI_Isend(bytes.get(), static_cast<int>(text.size()), MPI_BYTE, peer, tag, comm_, &req), "MPI_Isend");
  requests_.push_back(req);
  in_flight_.push_back(InFlight{true, Message(), std::make_shared<Work>("leaving notice"), std::move(bytes), 0, tag, peer});
}

// Notices whose receive completed, each handled once no earlier message of its sender is
// still being received: MPI matches one sender's messages in order, but a large one may
// complete after a small one that follows it.
void MpiTransport::handleNotices() {
  for (auto it = notices_.begin(); it != notices_.end();) {
    const int peer = it->source;
    const bool earlier = std::any_of(in_flight_.begin(), in_flight_.end(), [peer](const InFlight& f) {
      return !f.is_send && f.source == peer && f.tag != kLeavingTag && f.tag != kLeftTag;
    });
    if (earlier) {
      ++it;
      continue;
    }
    const Notice notice = std::move(*it);
    it = notices_.erase(it);
    onNotice(notice.source, notice.tag, notice.why);
  }
}

// A peer's leaving notice: nothing more goes to it, and it is answered after everything
// already handed to MPI for it (MPI keeps one sender's messages in order), so that once it
// has the answer it has all of this rank's sends. Its own notice answers this rank's.
void MpiTransport::onNotice(int peer, int tag, const std::string& why) {
  if (tag == kLeftTag) {
    awaiting_answer_[peer] = false;
    return;
  }
  // The session first, so that its waits fail with the reason rather than with a send's.
  if (callbacks_.on_peer_left) callbacks_.on_peer_left(peer, why);
  std::vector<SendQueue<Outgoing>::Entry> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    departed_[peer] = true;
    dropped = outbox_.takeIf([peer](const Outgoing& o) { return o.peer == peer; });
    unsent_ -= dropped.size();
  }
  sent_cv_.notify_all();
  dropQueued(std::move(dropped), detail::cat("not sent: rank ", peer, " left the job: ", why));
  if (awaiting_answer_[peer]) {
    awaiting_answer_[peer] = false;
  } else {
    postNotice(peer, kLeftTag, "");
  }
}

bool MpiTransport::awaitingAnswers() const {
  return std::any_of(awaiting_answer_.begin(), awaiting_answer_.end(), [](bool b) { return b; });
}

void MpiTransport::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) stop_deadline_ = std::chrono::steady_clock::now() + kDrainTimeout;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MpiTransport::check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(detail::cat(call, " failed on rank ", rank_, ": ", std::string(text, len)));
}

void MpiTransport::recordWait(const SendQueue<Outgoing>::Entry& e, Clock::time_point now) {
  if (!e.network) return;
  const double wait = std::chrono::duration<double>(now - e.queued).count();
  ++stats_.messages;
  stats_.wait_seconds += wait;
  stats_.max_wait_seconds = std::max(stats_.max_wait_seconds, wait);
  // Layer traffic only: control messages are start-up and between-epoch chatter, much of
  // it before the timeline's origin.
  if (policy_.timeline != nullptr && e.priority != Message::kUrgent) {
    policy_.timeline->span("send queue", detail::cat("layer ", e.priority, " to rank ", e.item.peer), "bandwidth",
                           e.queued, now);
  }
}

bool MpiTransport::postSends() {
  std::vector<Outgoing> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pushes_seen_ = pushes_;
    const auto now = Clock::now();
    std::size_t in_flight = window_bytes_in_flight_;
    while (auto e = outbox_.pop(in_flight, policy_.window_bytes, *budget_, now)) {
      recordWait(*e, now);
      e->item.window_bytes = e->network ? e->bytes : 0;
      in_flight += e->item.window_bytes;
      ready.push_back(std::move(e->item));
    }
  }
  for (auto& out : ready) post(out);
  return !ready.empty();
}

void MpiTransport::post(Outgoing& out) {
  MPI_Request req;
  // The tag is the message type; the header inside the bytes carries the rest.
  const int tag = static_cast<int>(out.message.type());
  if (out.message.contiguous() || out.message.payloadBytes() == 0) {  // wire(): header and payload, or a header alone
    check(
        MPI_Isend(out.message.wire(), static_cast<int>(out.message.wireBytes()), MPI_BYTE, out.peer, tag, comm_, &req),
        "MPI_Isend");
  } else if (out.message.payloadBytes() < kSplitBytes) {
    // Header and payload from where they are, one message: MPI packs them (a small copy).
    MPI_Aint where[2];
    check(MPI_Get_address(out.message.headerBytes(), &where[0]), "MPI_Get_address");
    check(MPI_Get_address(out.message.payload(), &where[1]), "MPI_Get_address");
    const int lengths[2] = {static_cast<int>(sizeof(MessageHeader)), static_cast<int>(out.message.payloadBytes())};
    MPI_Datatype type;
    check(MPI_Type_create_hindexed(2, lengths, where, MPI_BYTE, &type), "MPI_Type_create_hindexed");
    check(MPI_Type_commit(&type), "MPI_Type_commit");
    check(MPI_Isend(MPI_BOTTOM, 1, type, out.peer, tag, comm_, &req), "MPI_Isend");
    MPI_Type_free(&type);  // released by MPI once the send completes
  } else {
    req = postApart(out, tag);
  }
  requests_.push_back(req);
  window_bytes_in_flight_ += out.window_bytes;
  in_flight_.push_back(InFlight{true, std::move(out.message), std::move(out.work), nullptr, out.window_bytes});
}

MPI_Request MpiTransport::postApart(const Outgoing& out, int tag) {
  // The header's bytes are copied: the message, which holds them, may be released (its
  // payload sent) before the header's send is done.
  auto header = std::unique_ptr<std::uint8_t[]>(new std::uint8_t[sizeof(MessageHeader)]);
  std::memcpy(header.get(), out.message.headerBytes(), sizeof(MessageHeader));
  MPI_Request req;
  check(MPI_Isend(header.get(), static_cast<int>(sizeof(MessageHeader)), MPI_BYTE, out.peer, tag, comm_, &req),
        "MPI_Isend");
  requests_.push_back(req);
  in_flight_.push_back(InFlight{true, Message(), nullptr, std::move(header), 0, kHeaderPartTag, out.peer});
  check(MPI_Isend(out.message.payload(), static_cast<int>(out.message.payloadBytes()), MPI_BYTE, out.peer, kPayloadTag,
                  comm_, &req),
        "MPI_Isend");
  return req;
}

bool MpiTransport::probeReceives() {
  bool any = false;
  while (true) {
    int flag = 0;
    MPI_Message handle;
    MPI_Status status;
    check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &handle, &status), "MPI_Improbe");
    if (!flag) return any;
    any = true;
    int count = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    if (status.MPI_TAG == kPayloadTag) {  // its header's receive takes it; never probed alone
      throw CommError(detail::cat("rank ", status.MPI_SOURCE, " sent a payload of ", count, " bytes without its header"));
    }
    if (count == static_cast<int>(sizeof(MessageHeader)) && status.MPI_TAG != kLeavingTag &&
        status.MPI_TAG != kLeftTag) {
      receiveSplit(handle, status.MPI_SOURCE, status.MPI_TAG);  // a header, and maybe a payload apart
      continue;
    }
    // Never allocate what no valid message can be: the transport fails instead (and with
    // it the job), before a hostile or corrupt length can exhaust memory.
    if (static_cast<std::size_t>(count) > max_payload_bytes_ + sizeof(MessageHeader)) {
      throw CommError(detail::cat("rank ", status.MPI_SOURCE, " sent a message of ", count,
                                  " bytes, over the limit of ", max_payload_bytes_));
    }
    InFlight in{false,
                Message(),
                nullptr,
                std::unique_ptr<std::uint8_t[]>(new std::uint8_t[std::max(1, count)]),
                static_cast<std::size_t>(count),
                status.MPI_TAG,
                status.MPI_SOURCE};
    MPI_Request req;
    check(MPI_Imrecv(in.buffer.get(), count, MPI_BYTE, &handle, &req), "MPI_Imrecv");
    requests_.push_back(req);
    in_flight_.push_back(std::move(in));
  }
}

bool MpiTransport::payloadComplete(const MPI_Status& status, const InFlight& f) {
  int count = 0;
  check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  return static_cast<std::size_t>(count) + sizeof(MessageHeader) == f.size;
}

void MpiTransport::receiveSplit(MPI_Message& handle, int source, int tag) {
  MessageHeader h;
  // Probed, so it has arrived: a 32-byte receive that completes at once.
  check(MPI_Mrecv(&h, static_cast<int>(sizeof(h)), MPI_BYTE, &handle, MPI_STATUS_IGNORE), "MPI_Mrecv");
  checkHeader(h, max_payload_bytes_);  // before its length is trusted
  if (tag != static_cast<int>(h.type)) {
    throw CommError(detail::cat("rank ", source, " sent a header of type ", h.type, " under tag ", tag));
  }
  const std::size_t size = sizeof(h) + h.payload_bytes;
  InFlight in{false, Message(), nullptr, std::unique_ptr<std::uint8_t[]>(new std::uint8_t[size]), size, tag, source, true};
  std::memcpy(in.buffer.get(), &h, sizeof(h));
  if (h.payload_bytes == 0) {  // a message with nothing more: delivered now, as once its receive completed
    callbacks_.on_message(Message::decode(std::move(in.buffer), size, max_payload_bytes_));
    return;
  }
  // Posted before the next probe: this sender's next kPayloadTag message is this one's.
  MPI_Request req;
  check(MPI_Irecv(in.buffer.get() + sizeof(h), static_cast<int>(h.payload_bytes), MPI_BYTE, source, kPayloadTag, comm_,
                  &req),
        "MPI_Irecv");
  requests_.push_back(req);
  in_flight_.push_back(std::move(in));
}

bool MpiTransport::testInFlight() {
  if (requests_.empty()) return false;
  std::vector<int> done(requests_.size());
  std::vector<MPI_Status> statuses(requests_.size());
  int outcount = 0;
  const int rc =
      MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &outcount, done.data(), statuses.data());
  // MPI_ERR_IN_STATUS: some completed with an error, each in its status. An awaited request's
  // goes to its waiter (its collective fails, not this transport); one of ours ends the loop.
  if (rc != MPI_ERR_IN_STATUS) check(rc, "MPI_Testsome");
  if (outcount <= 0) return false;
  std::size_t sent = 0;
  bool awaited_done = false;
  for (int i = 0; i < outcount; ++i) {
    InFlight& f = in_flight_[done[i]];
    requests_[done[i]] = MPI_REQUEST_NULL;  // finished here (MPI has freed it, or keeps one that failed)
    const bool notice = f.tag == kLeavingTag || f.tag == kLeftTag;
    const int error = rc == MPI_ERR_IN_STATUS ? statuses[i].MPI_ERROR : MPI_SUCCESS;
    if (f.awaited) {
      std::lock_guard<std::mutex> lock(mu_);
      f.awaited->error = error;
      f.awaited->done = true;
      awaited_done = true;
      awaited_completed_.fetch_add(1);
    } else if (error != MPI_SUCCESS) {
      check(error, "MPI_Testsome");
    } else if (f.is_send && f.tag == kHeaderPartTag) {
      f.buffer.reset();
    } else if (f.is_send && notice) {
      f.work->markDone();
      f.buffer.reset();
    } else if (f.is_send) {
      f.work->markDone();
      f.message = Message();
      window_bytes_in_flight_ -= f.size;
      ++sent;
    } else if (f.split && !payloadComplete(statuses[i], f)) {
      throw CommError(detail::cat("rank ", f.source, " sent a payload shorter than its header announced"));
    } else if (notice) {
      notices_.push_back(Notice{f.source, f.tag, std::string(reinterpret_cast<const char*>(f.buffer.get()), f.size)});
    } else {
      callbacks_.on_message(Message::decode(std::move(f.buffer), f.size, max_payload_bytes_));
    }
  }
  // Compact: drop completed entries (their requests are MPI_REQUEST_NULL now).
  std::size_t keep = 0;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    requests_[keep] = requests_[i];
    if (keep != i) in_flight_[keep] = std::move(in_flight_[i]);
    ++keep;
  }
  requests_.resize(keep);
  in_flight_.resize(keep);
  if (awaited_done) awaited_cv_.notify_all();
  handleNotices();
  if (sent > 0) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      unsent_ -= sent;
    }
    sent_cv_.notify_all();
  }
  return true;
}

MpiRequestPoller::Outcome MpiTransport::await(MPI_Request request, Clock::time_point until,
                                              const FailureState& failure, int& mpi_error) {
  auto awaited = std::make_shared<Awaited>();
  awaited->request = request;
  std::unique_lock<std::mutex> lock(mu_);
  if (!polling_) return Outcome::kNotPolling;
  awaited_.push_back(awaited);
  ++pushes_;
  cv_.notify_one();
  while (!awaited->done && !awaited->ended) {
    const auto now = Clock::now();
    if (failure.failed() || now >= until) {
      awaited->given_up = true;  // the progress thread keeps testing it, but stop() does not wait for it
      any_given_up_.store(true);
      return Outcome::kGaveUp;
    }
    awaited_cv_.wait_until(lock, std::min(until, now + kAwaitFailureLook));
  }
  if (!awaited->adopted) return Outcome::kNotPolling;  // the loop ended before it took it
  if (!awaited->done) return Outcome::kStopped;
  mpi_error = awaited->error;
  return mpi_error == MPI_SUCCESS ? Outcome::kDone : Outcome::kFailed;
}

bool MpiTransport::adoptAwaited() {
  std::vector<std::shared_ptr<Awaited>> adopted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    adopted.swap(awaited_);
    for (auto& a : adopted) a->adopted = true;
  }
  for (auto& a : adopted) {
    requests_.push_back(a->request);
    InFlight f{false, Message(), nullptr, nullptr};
    f.awaited = std::move(a);
    in_flight_.push_back(std::move(f));
  }
  return !adopted.empty();
}

void MpiTransport::endAwaited() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    polling_ = false;
    for (auto& a : awaited_) a->ended = true;
    awaited_.clear();
    for (auto& f : in_flight_) {
      if (f.awaited && !f.awaited->done) f.awaited->ended = true;
    }
  }
  awaited_cv_.notify_all();
}

bool MpiTransport::onlyGivenUpLeft() {
  if (!any_given_up_.load()) return false;  // a healthy run: no lock on the poll's path
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : in_flight_) {
    if (!f.awaited || !f.awaited->given_up) return false;
  }
  return true;
}

bool MpiTransport::ownInFlight() const {
  return std::any_of(in_flight_.begin(), in_flight_.end(), [](const InFlight& f) { return !f.awaited; });
}

void MpiTransport::runLoop() {
  pthread_setname_np(pthread_self(), "poseidon-mpi");
  {
    std::lock_guard<std::mutex> lock(mu_);
    polling_ = true;
  }
  progressLoop();
  endAwaited();
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_ended_ = true;
  }
  sent_cv_.notify_all();
}

void MpiTransport::progressLoop() {
  auto backoff = kMinBackoff;
  try {
    while (true) {
      if (pastStopDeadline()) {
        abandoned_ = ownInFlight();  // those requests stay with MPI: the owner ends the job
        return;
      }
      sayGoodbye();
      bool progressed = postSends();
      progressed |= adoptAwaited();  // after postSends, which saw pushes_: none is left unseen
      progressed |= probeReceives();
      progressed |= testInFlight();
      if (progressed) {
        backoff = kMinBackoff;
        continue;
      }
      // Collectives whose waiters gave up (a failing run) are tested at the idle pace, and
      // stopping leaves them to MPI, their buffers with their communicator
      // (MpiCommunicator::abandoned): not this transport's sends to drain.
      if (!requests_.empty() && !onlyGivenUpLeft()) {
        // A transfer is under way: poll again soon. A short sleep rather than a
        // sched_yield spin measured as fast (fcnet, 4 ranks on 2 cores) and leaves the
        // core to the ranks that compute.
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, kInFlightPoll, [&] { return pushes_ != pushes_seen_; });
        continue;
      }
      const bool awaiting = awaitingAnswers();  // a leaver takes what its peers sent until they answer
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_ && outbox_.empty() && !awaiting && (!leaving_ || goodbyeSaid())) return;
      if (size_ == 1) {
        // Alone in the job: nothing can arrive that this rank did not send, so sleep until
        // it sends (polling here only takes cycles from the compute thread).
        cv_.wait(lock, [&] { return pushes_ != pushes_seen_ || stopping_; });
        continue;
      }
      // A queue held back by the budget is looked at again after the back-off too.
      cv_.wait_for(lock, backoff, [&] { return pushes_ != pushes_seen_ || (stopping_ && !awaiting); });
      backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::microseconds>(kMaxBackoff));
    }
  } catch (...) {
    auto error = std::current_exception();
    abandoned_ = ownInFlight();  // MPI still holds them: kept until the job ends
    for (auto& f : in_flight_) {
      if (f.is_send && f.work) f.work->markDone(error);  // a header part has none
    }
    if (callbacks_.on_error) callbacks_.on_error(error);
  }
}

}  // namespace poseidon
