// The KVStore push/pull API over MPI_Allreduce (Mamidala 2018): init(key) gives every rank
// rank 0's value, push(key, grad) makes the stored value the sum of every rank's grad, and
// pull(key, out) copies it out. push and pull are engine tasks; they run when the tags
// they depend on allow. Collectives must be issued in the same order on every rank or
// they deadlock, while gradients become ready in whatever order threads finish; each
// design below solves that differently:
//   funnel     - one thread issues every collective, in ascending key order, one round
//                of keys after another (every key is pushed once per round);
//   concurrent - keys hashed onto C duplicated communicators; on each, collectives run in
//                push order (a tag per communicator), on `outstanding` engine threads;
//   chained    - every collective mutates one dummy tag, so they run one at a time in push
//                order; a user queues the pushes ahead of what reads the sums.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "allreduce/communicator.h"
#include "allreduce/sum16.h"
#include "engine/engine.h"
#include "poseidon/options.h"

namespace poseidon {

class Transport;
class Timeline;
struct StateRecord;

enum class KVStoreType { kFunnel, kConcurrent, kChained };
// Throws OptionError on an unknown name.
KVStoreType parseKVStoreType(const std::string& name);
const char* kvstoreTypeName(KVStoreType type);

struct KVStoreOptions {
  KVStoreType type = KVStoreType::kChained;
  int communicators = 2;  // concurrent: C
  int outstanding = 2;    // concurrent: collectives in flight at most
  std::chrono::milliseconds timeout = kDefaultTimeout;
  Timeline* timeline = nullptr;  // records each collective, if set
  // How the sums travel (issue 38): fp32, or 16 bits (Communicator::allreduceSum16).
  WireFormat wire = WireFormat::kFp32;
  // On a 16-bit wire: each key keeps its roundings' residuals for its next push (sum16.h).
  bool error_feedback = false;

  // Throws OptionError for settings that could deadlock or make no sense.
  void validate() const;
  // Engine comm threads the design runs its collectives on.
  int commThreads() const;
};

class KVStore {
 public:
  // Creates the communicators the design needs: collective, same options on every rank.
  static std::unique_ptr<KVStore> create(const KVStoreOptions& options, Engine& engine, Transport& transport,
                                         FailureState& failure);
  virtual ~KVStore() = default;

  // In the same order on every rank, with the same `stepped`: the key stores `count`
  // floats, rank 0's `value` (a collective, synchronous). A `stepped` key is pushed with
  // pushStepped only and stores nothing: its pushes' targets hold its values, equal on
  // every rank already (the caller broadcast them), so `value` may be null and no
  // collective runs.
  void init(int key, const float* value, std::size_t count, bool stepped = false);
  // After the tasks queued before on `grad_tag` (mutations): the key's value becomes the
  // sum over ranks of `grad`.
  void push(int key, const float* grad, Engine::Tag grad_tag);
  // A stepped key's collective, the step by owner (Communicator::stepped, on the store's
  // wire): each rank's `step` updates its slice of `targets` from every rank's contribution
  // to it, and every rank's `targets` get every slice. The key has no value to pull.
  void pushStepped(int key, const float* grad, Engine::Tag grad_tag, const PiecedBuffer* targets, OwnerStep step);
  // After the key's earlier pushes: copies the value into `out` (a mutation of `out_tag`).
  void pull(int key, float* out, Engine::Tag out_tag);
  // The sum where it lands, without pull's copy: a task that reads tag(key) reads
  // value(key) after the key's earlier pushes and before its next one (the engine orders
  // them). Not a push's source here: the allreduce buckets copy their gradients into
  // buffers of their own.
  const float* value(int key);
  Engine::Tag tag(int key) { return entry(key).tag; }

  std::size_t count(int key) const;
  KVStoreType type() const { return options_.type; }
  // Error feedback's residuals (ef/allreduce/key<k>/sent, and /sum or, on a stepped key,
  // /update: the owner's rounding is of the update there), for checkpoints: a resumed run
  // carries on with them. None without error feedback.
  void addStateRecords(std::vector<StateRecord>& records);
  // Stops the design's own threads (funnel); the engine must be idle.
  virtual void stop() {}
  // A communicator gave up on a collective in flight (see Communicator::abandoned).
  virtual bool abandoned() const = 0;

 protected:
  struct Entry {
    std::vector<float> value;  // empty for a stepped key
    std::size_t count = 0;
    Engine::Tag tag = 0;
    std::unique_ptr<sum16::Feedback> feedback;  // with error feedback on a 16-bit wire
    bool stepped = false;                       // pushed by owner's step (init)
  };
  // One push's collective: the sum of `grad` into `value`, or the step by owner into
  // `targets` when `step` is set.
  struct Collective {
    const float* grad = nullptr;
    float* value = nullptr;
    std::size_t count = 0;
    sum16::Feedback* feedback = nullptr;
    const PiecedBuffer* targets = nullptr;
    OwnerStep step;
    void run(Communicator& comm, WireFormat wire) const;
  };
  KVStore(const KVStoreOptions& options, Engine& engine) : options_(options), engine_(engine) {}
  // Queues the push's collective (the key's, from the entry).
  virtual void issue(int key, Entry& entry, Collective collective, Engine::Tag grad_tag) = 0;
  virtual Communicator& initCommunicator() = 0;
  // Queues the collective on an engine comm thread, after the tasks before it on
  // `order_tag` (the design's ordering tag) and on the key's own tag.
  void queueAllreduce(Communicator& comm, std::string track, int key, Entry& entry, Collective collective,
                      Engine::Tag grad_tag, Engine::Tag order_tag);
  Entry& entry(int key);

  const KVStoreOptions options_;
  Engine& engine_;
  std::map<int, Entry> entries_;  // set up by init() before any push
};

}  // namespace poseidon
