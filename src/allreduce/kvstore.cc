#include "allreduce/kvstore.h"

#include <algorithm>
#include <cstring>

#include "allreduce/communicators.h"
#include "allreduce/funnel_kvstore.h"
#include "comm/transport.h"
#include "common/names.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"
#include "poseidon/state_record.h"
#include "poseidon/timeline.h"

namespace poseidon {

namespace {

constexpr NameTable<KVStoreType, 3> kKVStoreTypes{
    {{KVStoreType::kFunnel, "funnel"}, {KVStoreType::kConcurrent, "concurrent"}, {KVStoreType::kChained, "chained"}}};

}  // namespace

KVStoreType parseKVStoreType(const std::string& name) {
  if (const KVStoreType* type = valueIn(kKVStoreTypes, name)) return *type;
  throw OptionError("{kvstore=" + name + "}: use " + namesIn(kKVStoreTypes));
}

const char* kvstoreTypeName(KVStoreType type) { return nameIn(kKVStoreTypes, type); }

void KVStoreOptions::validate() const {
  if (communicators < 1 || communicators > 64) {
    throw OptionError(detail::cat("{kvstore_comms=", communicators, "}: use 1 to 64 communicators"));
  }
  // A thread blocked in a collective on one communicator cannot serve another; with fewer
  // threads than communicators, two ranks can each wait inside a different one.
  if (type == KVStoreType::kConcurrent && outstanding < communicators) {
    throw OptionError(detail::cat("{kvstore_outstanding=", outstanding, "} is below {kvstore_comms=", communicators,
                                  "}: each communicator needs a thread of its own, or ranks can block each other"));
  }
  if (outstanding < 1) throw OptionError("{kvstore_outstanding} must be at least 1");
}

int KVStoreOptions::commThreads() const { return type == KVStoreType::kConcurrent ? outstanding : 1; }

KVStore::Entry& KVStore::entry(int key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw Error(detail::cat("KVStore key ", key, " was never initialised"));
  return it->second;
}

std::size_t KVStore::count(int key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.count;
}

void KVStore::init(int key, const float* value, std::size_t count, bool stepped) {
  POSEIDON_ENFORCE(entries_.count(key) == 0, "KVStore key ", key, " initialised twice");
  Entry e;
  e.stepped = stepped;
  e.count = count;
  e.tag = engine_.newTag(detail::cat("kvstore key ", key));
  if (options_.error_feedback && options_.wire != WireFormat::kFp32) e.feedback = std::make_unique<sum16::Feedback>(count);
  if (!stepped) {
    e.value.assign(value, value + count);
    initCommunicator().broadcast(e.value.data(), count, 0);
  }
  entries_.emplace(key, std::move(e));
}

const float* KVStore::value(int key) {
  Entry& e = entry(key);
  POSEIDON_ENFORCE(!e.stepped, "KVStore key ", key, " is stepped by owner: it stores no value");
  return e.value.data();
}

void KVStore::addStateRecords(std::vector<StateRecord>& records) {
  for (auto& [key, e] : entries_) {
    if (!e.feedback) continue;
    const char* owners = e.stepped ? "update" : "sum";
    for (auto [name, residual] : {std::pair{"sent", &e.feedback->sent}, std::pair{owners, &e.feedback->sum}}) {
      records.push_back(
          StateRecord{detail::cat("ef/allreduce/key", key, "/", name), residual->data(), residual->size() * sizeof(float)});
    }
  }
}

void KVStore::push(int key, const float* grad, Engine::Tag grad_tag) {
  Entry& e = entry(key);
  POSEIDON_ENFORCE(!e.stepped, "KVStore key ", key, " is stepped by owner: pushStepped, not push");
  issue(key, e, Collective{grad, e.value.data(), e.value.size(), e.feedback.get(), nullptr, {}}, grad_tag);
}

void KVStore::pushStepped(int key, const float* grad, Engine::Tag grad_tag, const PiecedBuffer* targets,
                          OwnerStep step) {
  Entry& e = entry(key);
  POSEIDON_ENFORCE(e.stepped, "KVStore key ", key, " was not initialised for the step by owner");
  POSEIDON_ENFORCE_EQ(targets->count(), e.count, "values of a stepped push's targets");
  issue(key, e, Collective{grad, nullptr, e.count, e.feedback.get(), targets, std::move(step)}, grad_tag);
}

void KVStore::Collective::run(Communicator& comm, WireFormat wire) const {
  if (step) {
    comm.stepped(wire, grad, *targets, step, feedback);
  } else {
    comm.sum(wire, grad, value, count, feedback);
  }
}

void KVStore::pull(int key, float* out, Engine::Tag out_tag) {
  Entry& e = entry(key);
  const float* from = value(key);
  const std::size_t bytes = e.value.size() * sizeof(float);
  engine_.push([from, out, bytes] { std::memcpy(out, from, bytes); }, {e.tag}, {out_tag}, Engine::Kind::kCopy);
}

void KVStore::queueAllreduce(Communicator& comm, std::string track, int key, Entry& e, Collective collective,
                             Engine::Tag grad_tag, Engine::Tag order_tag) {
  Timeline* timeline = options_.timeline;
  const WireFormat wire = options_.wire;
  engine_.push(
      [&comm, collective = std::move(collective), timeline, key, wire, track = std::move(track)] {
        TimelineSpan span(timeline, track, timeline ? detail::cat("allreduce key ", key) : "", "allreduce");
        collective.run(comm, wire);
      },
      {grad_tag}, {e.tag, order_tag}, Engine::Kind::kComm);
}

namespace {

// Collectives one at a time in push order: all of them mutate one dummy tag.
class ChainedKVStore final : public KVStore {
 public:
  ChainedKVStore(const KVStoreOptions& o, Engine& engine, Transport& transport, FailureState& failure)
      : KVStore(o, engine), comm_(newCommunicator(transport, o.timeout, failure)), chain_(engine.newTag("chain")) {}

 private:
  void issue(int key, Entry& e, Collective collective, Engine::Tag grad_tag) override {
    queueAllreduce(*comm_, "engine comm", key, e, std::move(collective), grad_tag, chain_);
  }
  Communicator& initCommunicator() override { return *comm_; }
  bool abandoned() const override { return comm_->abandoned(); }

  std::unique_ptr<Communicator> comm_;
  const Engine::Tag chain_;
};

// Key k's collectives go to communicator k mod C and run in push order there; the C
// communicators proceed independently, each on an engine comm thread.
class ConcurrentKVStore final : public KVStore {
 public:
  ConcurrentKVStore(const KVStoreOptions& o, Engine& engine, Transport& transport, FailureState& failure)
      : KVStore(o, engine) {
    for (int c = 0; c < o.communicators; ++c) {
      comms_.push_back(newCommunicator(transport, o.timeout, failure));
      tags_.push_back(engine.newTag(detail::cat("communicator ", c)));
    }
  }

 private:
  void issue(int key, Entry& e, Collective collective, Engine::Tag grad_tag) override {
    const std::size_t c = static_cast<std::size_t>(key) % comms_.size();
    queueAllreduce(*comms_[c], detail::cat("engine comm ", c), key, e, std::move(collective), grad_tag, tags_[c]);
  }
  Communicator& initCommunicator() override { return *comms_[0]; }
  bool abandoned() const override {
    return std::any_of(comms_.begin(), comms_.end(), [](const auto& c) { return c->abandoned(); });
  }

  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<Engine::Tag> tags_;
};

}  // namespace

std::unique_ptr<KVStore> KVStore::create(const KVStoreOptions& options, Engine& engine, Transport& transport,
                                         FailureState& failure) {
  options.validate();
  switch (options.type) {
    case KVStoreType::kFunnel:
      return std::make_unique<FunnelKVStore>(options, engine, transport, failure);
    case KVStoreType::kConcurrent:
      return std::make_unique<ConcurrentKVStore>(options, engine, transport, failure);
    case KVStoreType::kChained:
      return std::make_unique<ChainedKVStore>(options, engine, transport, failure);
  }
  throw Error("unknown KVStore type");
}

}  // namespace poseidon
