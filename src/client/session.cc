#include "poseidon/session.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "bandwidth/send_policy.h"
#include "checkpoint/state_file.h"
#include "client/checked_options.h"
#include "client/client.h"
#include "client/layer_use.h"
#include "client/momentum_gather.h"
#include "client/progress_probe.h"
#include "comm/control_channel.h"
#include "comm/equal_everywhere.h"
#include "comm/transport.h"
#include "common/digest.h"
#include "common/fault.h"
#include "coordinator/cost_model.h"
#include "coordinator/information_book.h"
#include "coordinator/session_planner.h"
#include "node/device_client.h"
#include "coordinator/node_map.h"
#include "node/node_memory.h"
#include "node/node_stage.h"
#include "node/node_transport.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"
#include "ps/parameter_server.h"

namespace poseidon {

namespace {

// Routes incoming messages by type. Shared with the transport's callbacks so that a
// message arriving while the session is torn down finds nothing instead of freed memory.
struct Dispatch {
  std::mutex mu;
  ControlChannel* control = nullptr;  // guarded by mu
  ParameterServer* server = nullptr;  // guarded by mu
  Client* client = nullptr;           // guarded by mu
  NodeStage* stage = nullptr;         // guarded by mu: on a node's leader
  DeviceClient* device = nullptr;     // guarded by mu: on a node's other ranks
  FailureState* failure = nullptr;    // guarded by mu
  ProgressProbe* probe = nullptr;     // guarded by mu
  MomentumGather* gather = nullptr;   // guarded by mu
  LayerUse* use = nullptr;            // guarded by mu

  // A failure from the transport's thread; after detach() there is no session to tell.
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (failure) failure->set(e);
  }

  void route(Message m) {
    std::lock_guard<std::mutex> lock(mu);
    switch (m.type()) {
      case MsgType::kControl:
        if (control) control->onMessage(std::move(m));
        return;
      case MsgType::kWhere:
      case MsgType::kHere:
        if (probe) probe->onMessage(m);
        return;
      case MsgType::kMomentumAsk:
      case MsgType::kMomentum:
        if (gather) gather->onMessage(m);
        return;
      case MsgType::kUseAsk:
      case MsgType::kUse:
        if (use) use->onMessage(m);
        return;
      case MsgType::kPushGrad:
      case MsgType::kPushGrad16:
        if (!server)
          throw CommError(detail::cat("rank ", m.header().source, " pushed a gradient to a rank with no shard"));
        server->onPush(std::move(m));
        return;
      case MsgType::kParams:
      case MsgType::kParams16:
      case MsgType::kMeanGrad16:
        if (!client)
          throw CommError(detail::cat("rank ", m.header().source, " sent parameters to a rank that does not train"));
        client->onParams(std::move(m));
        return;
      case MsgType::kPushFactors:
        if (!server)
          throw CommError(detail::cat("rank ", m.header().source, " pushed factors to a rank with no shard"));
        server->onPushFactors(std::move(m));
        return;
      case MsgType::kFactors:
      case MsgType::kFactors16:
      case MsgType::kRows:
        if (!client)
          throw CommError(detail::cat("rank ", m.header().source, " sent a layer's factors or rows to a rank that "
                                      "does not train"));
        client->onLayerMessage(std::move(m));
        return;
      case MsgType::kNodeGrad:
      case MsgType::kNodeGradShared:
      case MsgType::kNodeFactors:
        if (!stage)
          throw CommError(detail::cat("rank ", m.header().source, " sent its share to a rank that leads no node"));
        stage->deliver(std::move(m));
        return;
      case MsgType::kNodeParams:
      case MsgType::kNodeParamsShared:
        if (!device)
          throw CommError(detail::cat("rank ", m.header().source, " sent a layer to a rank that is no device"));
        device->deliver(std::move(m));
        return;
    }
  }
};

// Says where two descriptions first differ, with a little context.
std::string firstDifference(const std::string& a, const std::string& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from = i > 30 ? i - 30 : 0;
  return detail::cat("'...", a.substr(from, 80), "' vs '...", b.substr(from, 80), "'");
}

// What the devices level does not combine with yet: a clear error instead of a wrong job.
// Known only once the nodes are found (devices_per_node 0 groups by host).
void checkNodeOptions(const Options& o, SchemeMode mode) {
  const char* what = o.server_ranks > 0 || o.shards > 0
                         ? "{server_ranks} and {shards} (each node's leader holds a shard)"
                     : o.staleness > 0                 ? "{staleness}"
                     : o.straggler_timeout.count() > 0 ? "{straggler_timeout}"
                     : mode == SchemeMode::kFactorPush ? "{scheme=factor-push}"
                                                       : nullptr;
  if (what) throw OptionError(detail::cat("{devices_per_node} does not work with ", what, " yet; drop one of them"));
}

}  // namespace

// How long a closing session waits for its last sends to leave (a live peer takes them in
// milliseconds; a stalled one never does).
constexpr std::chrono::milliseconds kSettleLimit{2000};

struct Session::Impl {
  Transport& transport;
  Options options;
  CheckedOptions checked;  // parsed once, first of all
  FailureState failure;
  std::unique_ptr<InformationBook> book;
  NodeMap nodes = NodeMap::flat(1);
  // With devices per node: the leaders' network, on which server and client run, and the
  // leader's side of the devices level (both outlive the client, whose threads use them).
  std::unique_ptr<NodeTransport> net;
  std::unique_ptr<NodeMemory> memory;  // a node's shared memory (null: messages only); outlives stage and device
  std::unique_ptr<NodeStage> stage;
  PlatformRates rates;
  std::vector<LayerPlan> plan;
  std::vector<Scheme> schemes;
  std::vector<std::vector<float*>> params;
  std::shared_ptr<const void> params_owner;  // keeps `params` alive for sends from it
  std::shared_ptr<Dispatch> dispatch = std::make_shared<Dispatch>();
  // The loop's lr, momentum and weight decay per iteration, read by this rank's shard and
  // replicas (setStepValues).
  std::shared_ptr<StepValues> step_values = std::make_shared<StepValues>();
  ControlChannel control;
  // Answers how far this rank's loop got, and asks the others when a sync times out.
  ProgressProbe probe;
  // Answers what momentum this rank holds, and gathers every rank's (optimizer.state_dict()).
  MomentumGather gather;
  // Which layers each rank used in an iteration (DDP's rule for those no rank used).
  LayerUse use;
  // Before the components that record into it; shared with the transport, whose thread
  // records each send's wait in the queue and may outlive the session.
  std::shared_ptr<Timeline> timeline;
  std::unique_ptr<ParameterServer> server;
  // The shard's own values when it does not share the engine's memory (SSP, dropping);
  // shared with the fresh values' sends, which read it in place and may outlive the session.
  std::shared_ptr<std::unordered_map<std::uint32_t, std::vector<float>>> shard_values =
      std::make_shared<std::unordered_map<std::uint32_t, std::vector<float>>>();
  std::unique_ptr<Client> client;
  std::unique_ptr<DeviceClient> device;  // a rank of a node that is not its leader
  Worker* worker = nullptr;              // client or device: the training side, if this rank trains
  SessionLayout layout;                  // filled once the parts above are made
  bool finished = false;
  // Exceptions in flight when the session was made: more at destruction means an error is
  // unwinding through it.
  const int uncaught = std::uncaught_exceptions();

  Impl(Transport& t, const Options& o)
      : transport(t),
        options(o),
        checked(checkOptions(o)),
        control(t, o.timeout, failure),
        probe(t, o.staleness),
        gather(t, [this] { return momentumPieces(false); }),
        use(t) {}

  // The session's construction, step by step (Session::Session).
  void startTransport();
  void mapNodes();
  ClusterInfo cluster() const;
  std::vector<bool> planLayers(const ModelInfo& model, const ClusterInfo& cluster);
  bool separateShard() const;
  // How a shard's results travel back: with a 16-bit wire under BSP, 16-bit updates (server
  // mode) or mean gradients (gradient mode); otherwise fp32.
  WireFormat updateWire() const;
  void makeServer(const ClusterInfo& cluster, const SgdOptions& sgd);
  void makeWorker(const ClusterInfo& cluster, const SgdOptions& sgd);
  void publish();
  void describeLayout();
  // The momentum this rank keeps current, as views: only what no other rank replicates,
  // unless `replicated` (Session::gatherMomentum).
  std::vector<MomentumPiece> momentumPieces(bool replicated);
  // Fails on every rank unless every rank passed the same `mine`.
  void agree(const std::string& mine, const std::string& what);
  void checkPlanAndBroadcast(const ModelInfo& model);
  std::string nodeSummary() const;
  int networkRank() const;
  std::uint64_t bytesSent() const;
  // The training side, for a call only a training rank makes: fails where there is none
  // (a rank that only serves, or a session already finished).
  Worker* training() const {
    if (worker == nullptr) throw Error("a training call on a rank that does not train, or after finish()");
    return worker;
  }

  // Teardown in one order whatever failed before (finish() may not have run or got far):
  // the dispatcher lets go of everything, the server thread stops (it reads shard_values
  // and calls into the client), the client's threads go, then the server object. Every
  // wait still under way or queued (a layer's sync, a pull) sees the session fail and ends
  // within its 50 ms poll instead of running out its --timeout. The memory that sends still
  // with the network read (the engine's gradients and parameters, the shard's values) is
  // kept alive by those sends' messages, not by this object.
  ~Impl() {
    failure.set(std::make_exception_ptr(CommError("the session was closed")));
    detach();
    if (server) server->stop();
    worker = nullptr;
    client.reset();  // its threads may still call the co-located server: freed after them
    device.reset();
    // Sends still queued leave, or are dropped (their handles fail), so that nothing of
    // this session's goes out after it; those already with the network hold their memory.
    static_cast<void>(transport.settle(std::min<std::chrono::milliseconds>(options.timeout, kSettleLimit)));
    server.reset();
  }

  // Unhooks the dispatcher from this session's components before they go away.
  void detach() {
    std::lock_guard<std::mutex> lock(dispatch->mu);
    dispatch->control = nullptr;
    dispatch->server = nullptr;
    dispatch->client = nullptr;
    dispatch->stage = nullptr;
    dispatch->device = nullptr;
    dispatch->failure = nullptr;
    dispatch->probe = nullptr;
    dispatch->gather = nullptr;
    dispatch->use = nullptr;
  }
};

namespace {

// What every rank must share before any other collective (the rate probe is one), or
// ranks would wait on each other in different calls.
std::string startDescription(const ModelInfo& model, const Options& options) {
  return detail::cat(model.describe(), " | ", runConfiguration(options, ConfigurationUse::kStart));
}

// The steps' SGD: the servers' (and replicas') update, or in gradient mode a mean only.
SgdOptions sgdOptions(const Options& options, int per_node) {
  SgdOptions sgd;
  sgd.lr = options.lr;
  sgd.momentum = options.momentum;
  sgd.weight_decay = options.weight_decay;
  sgd.decay_iterations = options.lr_decay_iterations;
  if (options.gradient_mode) {
    // The workers' optimizer steps: every scheme's "step" writes the mean gradient.
    sgd = SgdOptions{};
    sgd.momentum = 0.0f;
    sgd.gradient_only = true;
  }
  // A leader's contribution is its node's sum: every mean divides by the devices too.
  sgd.devices = per_node;
  return sgd;
}

}  // namespace

Session::Session(Transport& transport, const ModelInfo& model, std::vector<std::vector<float*>> params,
                 const Options& options, std::shared_ptr<const void> params_owner)
    : impl_(std::make_unique<Impl>(transport, options)) {
  Impl& s = *impl_;  // its construction checked the options
  POSEIDON_ENFORCE_EQ(params.size(), model.layers.size(), "parameter buffers per layer");
  ClusterInfo(transport.size(), options.server_ranks, options.shards);  // checks the flags before any message
  s.params = std::move(params);
  s.params_owner = std::move(params_owner);
  s.startTransport();
  // Should anything below throw, ~Impl tears down what was made, in order.
  faultPoint(transport.rank(), "startup");
  s.agree(startDescription(model, options), "start-up agreement check");
  s.mapNodes();
  const ClusterInfo cluster = s.cluster();
  const std::vector<bool> on_ps = s.planLayers(model, cluster);
  s.book = std::make_unique<InformationBook>(model, cluster, options.kv_pair_bytes, on_ps);
  SgdOptions sgd = sgdOptions(options, s.nodes.devicesPerNode());
  sgd.step_values = s.step_values;
  s.makeServer(cluster, sgd);
  s.makeWorker(cluster, sgd);
  if (s.worker) s.probe.trains(s.worker->iteration());
  s.publish();
  s.describeLayout();
  s.checkPlanAndBroadcast(model);
}

void Session::Impl::startTransport() {
  if (options.timeline) timeline = std::make_shared<Timeline>(transport.rank());
  transport.configure(SendPolicy{checked.send_order, options.max_bandwidth,
                                 static_cast<std::size_t>(options.send_window_bytes), timeline});
  // Control messages flow from here on; the components that receive the other kinds are
  // created later, before the agreement check that every rank must pass before it sends any.
  dispatch->control = &control;
  dispatch->failure = &failure;
  dispatch->probe = &probe;
  dispatch->gather = &gather;
  dispatch->use = &use;
  auto d = dispatch;
  transport.start(TransportCallbacks{[d](Message m) {
                                       try {
                                         d->route(std::move(m));
                                       } catch (...) {
                                         d->fail(std::current_exception());
                                       }
                                     },
                                     [d](std::exception_ptr e) { d->fail(e); },
                                     [d](int peer, const std::string& why) {
                                       d->fail(std::make_exception_ptr(
                                           CommError(detail::cat("rank ", peer, " left the job: ", why))));
                                     }});
}

// The devices level: with nodes, the network exchange runs among the nodes' leaders (a
// cluster of one worker and one shard per node) and each node's other ranks are devices.
void Session::Impl::mapNodes() {
  const int me = transport.rank();
  nodes = options.devices_per_node == 1  ? NodeMap::flat(transport.size())
          : options.devices_per_node > 1 ? NodeMap::blocks(transport.size(), options.devices_per_node)
                                         : NodeMap::fromKeys(control.allgather(nodeKeyOfThisProcess(), "node names"));
  if (!nodes.hierarchical()) return;
  checkNodeOptions(options, checked.mode);
  if (nodes.isLeader(me)) net = std::make_unique<NodeTransport>(transport, nodes);
  std::vector<bool> same(transport.size());
  for (int r = 0; r < transport.size(); ++r) same[r] = nodes.sameNode(r, me);
  transport.setSameNode(same);
}

ClusterInfo Session::Impl::cluster() const {
  return nodes.hierarchical() ? ClusterInfo(nodes.nodes(), 0, 0)
                              : ClusterInfo(transport.size(), options.server_ranks, options.shards);
}

// HybComm: the scheme of every layer, the same on every rank. Returns which layers the
// servers hold (PS and factor push).
std::vector<bool> Session::Impl::planLayers(const ModelInfo& model, const ClusterInfo& cluster) {
  SessionPlan planned = planSession(control, transport.rank(), transport.size(), options, checked.mode, checked.rule,
                                    WireShares::of(checked.wire, updateWire(), checked.factor_wire),
                                    model, cluster, nodes);
  rates = planned.rates;
  plan = std::move(planned.layers);
  std::vector<bool> on_ps;
  for (const auto& p : plan) {
    schemes.push_back(p.scheme);
    on_ps.push_back(p.scheme == Scheme::kPS ||
                    p.scheme == Scheme::kFactorPush);  // factor-push layers live on the servers too
  }
  return on_ps;
}

// A worker that may compute while its co-located shard steps (SSP, straggler dropping)
// must not share memory with it: the shard keeps its own values then, and the local worker
// gets them by message like any other. In gradient mode the shard's "values" are the mean
// gradient, never the parameters.
bool Session::Impl::separateShard() const {
  return options.staleness > 0 || options.straggler_timeout.count() > 0 || options.gradient_mode;
}

// 16 bits back under BSP only: server mode's updates are differences that each worker adds
// to its copy, gradient mode's the mean gradient itself. SSP and straggler dropping send
// fp32 values (a worker may skip versions, or read them while computing).
WireFormat Session::Impl::updateWire() const {
  const bool bsp = options.staleness == 0 && options.straggler_timeout.count() == 0;
  return bsp ? checked.wire : WireFormat::kFp32;
}

void Session::Impl::makeServer(const ClusterInfo& cluster, const SgdOptions& sgd) {
  Transport& network = net ? *net : transport;
  const int net_rank = network.rank();
  const bool leads = nodes.isLeader(transport.rank());
  if (!(leads || !nodes.hierarchical()) || !cluster.hasShard(net_rank)) return;
  std::function<float*(const KVPair&)> storage = [this](const KVPair& kv) {
    return params[kv.layer][kv.tensor] + kv.offset;
  };
  if (separateShard()) {
    for (const auto key : book->pairsOfShard(cluster.shardOf(net_rank))) {
      (*shard_values)[key].resize(static_cast<std::size_t>(book->pair(key).length));
    }
    storage = [values = shard_values.get()](const KVPair& kv) { return values->at(kv.key).data(); };
  }
  std::shared_ptr<const void> values_owner = separateShard() ? std::shared_ptr<const void>(shard_values) : params_owner;
  server = std::make_unique<ParameterServer>(
      *book, network, sgd, storage,
      [this](std::uint32_t key, std::uint64_t version) { client->onLocalFresh(key, version); }, failure,
      ServerConfig{options.timeout, options.start_iteration, options.straggler_timeout, options.staleness,
                   separateShard(), timeline.get(), std::move(values_owner), updateWire(), options.error_feedback});
}

void Session::Impl::makeWorker(const ClusterInfo& cluster, const SgdOptions& sgd) {
  const int me = transport.rank();
  Transport& network = net ? *net : transport;
  // The leaders' allreduce communicators are made with MPI_Comm_create_group, which blocks
  // without a deadline: meet here first, so a rank that failed on the way makes the others
  // time out in this barrier rather than hang inside MPI.
  if (nodes.hierarchical() && std::count(schemes.begin(), schemes.end(), Scheme::kAllreduce) > 0) {
    control.barrier("start-up, before the leaders' allreduce communicators");
  }
  // Inside a node, layers travel in pieces of a KV pair's size (node/pieces.h).
  const std::size_t piece_floats =
      static_cast<std::size_t>(std::max<std::int64_t>(options.kv_pair_bytes, 4)) / sizeof(float);
  std::vector<bool> factors;
  for (auto sc : schemes) factors.push_back(sc == Scheme::kSFB);
  if (nodes.hierarchical() && options.node_memory) {
    // Gradients (not factors) go to the leader through shared memory where a node's ranks
    // can map one segment; the values come back the same way.
    std::vector<bool> gathered;
    for (bool f : factors) gathered.push_back(!f);
    memory = NodeMemory::open(control, nodes, me, book->model(), gathered);
  }
  if (nodes.hierarchical() && !nodes.isLeader(me)) {
    device = std::make_unique<DeviceClient>(
        book->model(), factors, transport, nodes.leader(nodes.nodeOf(me)), params,
        DeviceOptions{options.gradient_mode, options.timeout, options.start_iteration, piece_floats}, failure,
        memory.get());
    worker = device.get();
    return;
  }
  if (!cluster.isWorker(network.rank())) return;
  if (nodes.hierarchical()) {
    stage = std::make_unique<NodeStage>(book->model(), transport, nodes, params, options.gradient_mode, piece_floats,
                                        options.timeout, failure, memory.get());
  }
  KVStoreOptions kvstore = checked.kvstore;
  kvstore.timeline = timeline.get();
  client = std::make_unique<Client>(
      *book, network, server.get(), params, schemes,
      ClientOptions{options.wfbp, options.timeout, sgd, kvstore, options.fusion_bytes, options.start_iteration,
                    options.staleness, separateShard(), timeline.get(), stage.get(), checked.wire,
                    updateWire(), options.error_feedback, checked.factor_wire},
      failure);
  worker = client.get();
}

void Session::Impl::publish() {
  std::lock_guard<std::mutex> lock(dispatch->mu);
  dispatch->server = server.get();
  dispatch->client = client.get();
  dispatch->stage = stage.get();
  dispatch->device = device.get();
}

void Session::Impl::agree(const std::string& mine, const std::string& what) {
  const auto all = control.allgather(mine, what);
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r] != all[0]) {
      throw InputError(detail::cat("rank ", r, " runs a different model or configuration than rank 0: ",
                                   firstDifference(all[0], all[r]), "; start every rank with the same model and options"));
    }
  }
}

void Session::Impl::checkPlanAndBroadcast(const ModelInfo& model) {
  Impl& s = *this;
  // The plan and the book follow from what was agreed, but pushes landing on the wrong
  // shard would be silent: compare them too.
  std::string schemes;
  for (auto sc : s.schemes) schemes += std::string(schemeName(sc)) + ",";
  s.agree(detail::cat("schemes=", schemes, " book=", s.book->digest()), "plan agreement check");
  // Initial parameters come from rank 0 (or are already everybody's).
  faultPoint(s.transport.rank(), "broadcast");
  Digest held;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    for (std::size_t t = 0; t < model.layers[l].tensors.size(); ++t) {
      const auto n = model.layers[l].tensors[t].numel();
      if (s.options.replicas_equal) {
        held.update(s.params[l][t], n * sizeof(float));
      } else {
        s.control.broadcastFloats(s.params[l][t], n, 0, "initial parameters of " + model.layers[l].name);
      }
    }
  }
  if (s.options.replicas_equal) checkEqualEverywhere(s.control, held.hex(), "parameters");
  // A shard with values of its own starts from the same.
  for (auto& [key, values] : *s.shard_values) {
    const KVPair& kv = s.book->pair(key);
    std::memcpy(values.data(), s.params[kv.layer][kv.tensor] + kv.offset, values.size() * sizeof(float));
  }
  // Nobody trains before everybody holds them: a server-only shard would otherwise apply
  // the workers' first updates to values its copy of the broadcast has not yet replaced.
  s.control.barrier("initial parameters");
  if (s.timeline) s.timeline->setOrigin(Timeline::Clock::now());
}

Session::~Session() {
  // Unwinding from an error, the closing barrier would only wait --timeout for peers that
  // are themselves failing: the error goes on at once, and the peers learn of it from
  // the job's end.
  if (std::uncaught_exceptions() > impl_->uncaught) return;
  try {
    finish();
  } catch (...) {
    // A destructor never throws; the error was or will be reported by whoever waits.
  }
  // ~Impl stops the components in order.
}

void Session::Impl::describeLayout() {
  layout.rank = transport.rank();
  layout.size = transport.size();
  layout.worker = worker != nullptr;
  layout.has_shard = server != nullptr;
  layout.workers = nodes.hierarchical() ? nodes.ranks() : book->cluster().workers();
  layout.nodes = nodes.nodes();
  layout.devices_per_node = nodes.devicesPerNode();
  layout.node_summary = nodeSummary();
  layout.network_rank = networkRank();
  layout.shards = book->cluster().shards();
  layout.kv_pairs = book->pairs().size();
}

std::string Session::Impl::nodeSummary() const {
  if (!nodes.hierarchical()) return "";
  const std::string inside = memory ? detail::cat("shared memory (", memory->bytes() >> 20, " MiB per node)")
                             : options.node_memory ? "messages (its ranks could not map one shared memory segment)"
                                                   : "messages";
  return detail::cat(nodes.nodes(), " nodes of ", nodes.devicesPerNode(), " devices; inside a node by ", inside);
}

int Session::Impl::networkRank() const {
  const int me = transport.rank();
  if (!nodes.hierarchical()) return me;
  return nodes.isLeader(me) ? nodes.nodeOf(me) : -1;
}

const SessionLayout& Session::layout() const { return impl_->layout; }
Collectives& Session::control() { return impl_->control; }
const ModelInfo& Session::model() const { return impl_->book->model(); }

namespace {

// A sync's timeout explained by who is behind (ProgressProbe), unless it names a worker
// already. The hand-overs too: they rethrow a collective's timeout from the failure flag.
// A PS timeout that names no worker (only silent shards, or every worker at once) is asked
// about too: the shard may wait on a stopped rank, which the probe names, so this rank
// need not wait for a direct witness.
template <class Call>
void explained(ProgressProbe& probe, Call&& call) {
  try {
    call();
  } catch (const TimeoutError& e) {
    const auto* culprit = dynamic_cast<const CulpritTimeout*>(&e);
    if (culprit && culprit->namesWorker()) throw;
    probe.explain(e);
  }
}

}  // namespace

void Session::gradientsReady(int layer, std::vector<float*> grads, std::shared_ptr<const void> owner) {
  explained(impl_->probe, [&] {
    impl_->failure.rethrowIfFailed();
    impl_->training()->gradientsReady(layer, std::move(grads), std::move(owner));
  });
}

// The loop's waits on its peers hold ProgressProbe::InSync, the explanation included: a
// peer's probe then does not name this rank as stalled in its loop. (Not the hand-overs:
// a GPU model's run on a staging thread while the loop may be stuck in user code.)
void Session::endIteration() {
  const ProgressProbe::InSync waiting(impl_->probe);
  explained(impl_->probe, [&] {
    impl_->failure.rethrowIfFailed();
    impl_->training()->endIteration();
  });
  impl_->probe.trains(impl_->training()->iteration());
  faultPoint(impl_->transport.rank(), "iteration");
}

void Session::waitLayer(int layer) {
  const ProgressProbe::InSync waiting(impl_->probe);
  explained(impl_->probe, [&] { impl_->training()->waitLayer(layer); });
}
void Session::waitAll() {
  const ProgressProbe::InSync waiting(impl_->probe);
  if (impl_->worker) explained(impl_->probe, [&] { impl_->worker->waitAll(); });
}
std::uint64_t Session::iteration() const { return impl_->worker ? impl_->worker->iteration() : 0; }

void Session::recordUse(const std::vector<bool>& used) { impl_->use.record(impl_->training()->iteration(), used); }

std::vector<bool> Session::unusedByAll() {
  const ProgressProbe::InSync waiting(impl_->probe);  // held up by the others: not stalled in its loop
  return impl_->use.unusedByAll(impl_->training()->iteration(), impl_->options.timeout);
}

void Session::skipUnused(const std::vector<bool>& unused) {
  if (impl_->client) impl_->client->skipUnused(impl_->training()->iteration(), unused);
}

void Session::serveUntil(std::uint64_t iterations) {
  POSEIDON_ENFORCE(impl_->server != nullptr, "serveUntil on a rank without a shard");
  impl_->server->waitVersion(iterations, impl_->options.timeout);
}

void Session::factorsReady(int layer, const float* U, const float* V, std::int64_t K) {
  explained(impl_->probe, [&] {
    impl_->failure.rethrowIfFailed();
    impl_->training()->factorsReady(layer, U, V, K);
  });
}

void Session::setFactorGradients(int layer, std::vector<float*> grads) {
  impl_->training()->setFactorGradients(layer, std::move(grads));
}

void Session::layerReleased(int layer) { impl_->training()->layerReleased(layer); }

void Session::setStepValues(float lr, float momentum, float weight_decay) {
  const Options& o = impl_->options;
  POSEIDON_ENFORCE(!o.gradient_mode, "setStepValues in gradient mode (the workers' optimizer steps)");
  if (o.momentum == 0.0f && momentum != 0.0f) {
    throw InputError(detail::cat("momentum changed from 0 to ", momentum,
                                 ": the servers keep no momentum for a run started without it"));
  }
  if (o.server_ranks > 0 && (lr != o.lr || momentum != o.momentum || weight_decay != o.weight_decay)) {
    throw InputError(
        "the optimizer's lr, momentum or weight decay changed, but server-only ranks run no loop to "
        "learn it from: keep a shard on every worker (no server ranks) or use gradient mode");
  }
  impl_->step_values->set(iteration(), StepValues::Values{lr, momentum, weight_decay});
}

bool Session::setFactorApplier(int layer, std::unique_ptr<FactorApplier>& applier) {
  if (impl_->worker == nullptr) return false;
  POSEIDON_ENFORCE(iteration() == impl_->options.start_iteration, "setFactorApplier after training started");
  return impl_->worker->setFactorApplier(layer, applier);
}

const std::vector<LayerPlan>& Session::plan() const { return impl_->plan; }

std::string Session::resumeConfiguration(const std::string& front_end) const {
  const Impl& s = *impl_;
  std::string schemes;
  for (auto sc : s.schemes) schemes += std::string(schemeName(sc)) + ",";
  // The plan and the nodes as this run found them: --cost-model time measures, and a
  // state saved by one layout does not fit another.
  return detail::cat(runConfiguration(s.options, ConfigurationUse::kResume), " | ", s.book->model().describe(),
                     " | schemes=", schemes, " nodes=", s.nodes.nodes(), "x", s.nodes.devicesPerNode(), " | ",
                     front_end);
}
const PlatformRates& Session::rates() const { return impl_->rates; }

std::vector<StateRecord> Session::stateRecords() {
  Impl& s = *impl_;
  std::vector<StateRecord> records;
  const ModelInfo& model = s.book->model();
  // Every rank's parameters: on a worker the engine's, which co-located shards share; on a
  // server-only rank the memory its shard's pairs live in.
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    for (std::size_t t = 0; t < model.layers[l].tensors.size(); ++t) {
      records.push_back(StateRecord{detail::cat("params/", model.layers[l].name, "/", model.layers[l].tensors[t].name),
                                    s.params[l][t], model.layers[l].tensors[t].numel() * sizeof(float)});
    }
  }
  std::vector<std::uint32_t> keys;
  for (const auto& [key, values] : *s.shard_values) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (auto key : keys) {
    auto& v = (*s.shard_values)[key];
    records.push_back(StateRecord{detail::cat("ps/pair", key, "/values"), v.data(), v.size() * sizeof(float)});
  }
  if (s.server) s.server->addStateRecords(records);
  if (s.client) s.client->addStateRecords(records);
  return records;
}

std::vector<MomentumPiece> Session::Impl::momentumPieces(bool replicated) {
  // Asked by another rank (on the transport's thread): only the shard's and the allreduce
  // owners' records, which name memory and touch nothing; the replicated layers' records
  // may copy from a GPU, which only the loop's thread does.
  std::vector<StateRecord> records;
  if (server) server->addMomentumRecords(records);
  if (client && replicated) {
    client->addStateRecords(records);
  } else if (client) {
    client->addAllreduceMomentum(records);
  }
  std::vector<MomentumPiece> pieces;
  for (const auto& r : records) {
    if (r.momentum_of.layer < 0 || (r.replicated && !replicated)) continue;
    const auto floats = static_cast<std::int64_t>(r.bytes / sizeof(float));
    const std::int64_t begin = r.current_count < 0 ? 0 : r.current_begin;
    const std::int64_t count = r.current_count < 0 ? floats : r.current_count;
    if (count == 0) continue;
    ParamSlice of = r.momentum_of;
    of.offset += begin;
    pieces.push_back(MomentumPiece{of, static_cast<const float*>(r.data) + begin, count});
  }
  return pieces;
}

std::vector<MomentumValues> Session::gatherMomentum() {
  Impl& s = *impl_;
  const int me = s.transport.rank();
  if (s.options.gradient_mode) throw InputError("gradient mode: the workers' own optimizer holds its state");
  if (s.options.staleness > 0 || s.options.straggler_timeout.count() > 0) {
    // The shards step without this rank's contribution: their momentum would move while read.
    throw InputError("the optimizer's momentum cannot be gathered under staleness or straggler_timeout (the shards "
                     "step on without this rank); checkpoint the whole job instead");
  }
  if (s.nodes.hierarchical() && !s.nodes.isLeader(me)) {
    throw InputError(detail::cat("rank ", me, " is a device of its node (devices_per_node), whose leader steps the "
                                 "replicated layers: gather the optimizer's state on a node's first rank (rank 0 is one)"));
  }
  s.training()->waitAll();
  std::vector<MomentumValues> all = s.gather.gather(s.options.timeout);
  for (const auto& p : s.momentumPieces(true)) {
    all.push_back(MomentumValues{p.of, std::vector<float>(p.data, p.data + p.count)});
  }
  return all;
}

void Session::momentumSeeded() {
  Impl& s = *impl_;
  if (s.server) s.server->momentumSeeded();
  if (s.client) s.client->momentumSeeded();
}

Timeline* Session::timeline() const { return impl_->timeline.get(); }

std::string Session::replicaDigest() const {
  Digest d;
  if (impl_->nodes.hierarchical()) {
    // A device holds the replicated weights but not their momentum (its leader steps): the
    // ranks compare what all of them hold (PS layers too when their updates come in 16 bits).
    const ModelInfo& model = impl_->book->model();
    const bool ps_replicated = impl_->updateWire() != WireFormat::kFp32;
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      if (impl_->schemes[l] != Scheme::kSFB && !(ps_replicated && impl_->schemes[l] == Scheme::kPS)) continue;
      for (std::size_t t = 0; t < model.layers[l].tensors.size(); ++t) {
        d.update(impl_->params[l][t], model.layers[l].tensors[t].numel() * sizeof(float));
      }
    }
    return d.hex();
  }
  if (impl_->client) impl_->client->addReplicatedStateToDigest(d);
  return d.hex();
}

std::uint64_t Session::Impl::bytesSent() const {
  const TrafficCounters& traffic = transport.traffic();
  const int me = transport.rank();
  std::uint64_t inside = 0;  // to the node's other ranks: pieces that never cross the network
  for (int r = 0; nodes.hierarchical() && r < transport.size(); ++r) {
    if (r != me && nodes.sameNode(r, me)) inside += traffic.sentTo(r);
  }
  return traffic.sentTotal() - inside;
}

SessionStats Session::stats() const {
  const Impl& s = *impl_;
  SessionStats st;
  st.bytes_sent = s.bytesSent();
  const auto layers = s.book->model().layers.size();
  const std::int64_t K = s.options.batch * s.nodes.devicesPerNode();  // a leader sends for its node
  for (std::size_t l = 0; l < layers; ++l) {
    const int layer = static_cast<int>(l);
    std::uint64_t b = 0;
    if (s.client) b += s.client->bytesSentForLayer(layer);
    if (s.server) b += s.server->bytesSentForLayer(layer);
    st.bytes_sent_by_layer.push_back(b);
    st.predicted_bytes_by_layer.push_back(
        s.layout.network_rank < 0 ? 0.0
                                  : predictedBytesSent(*s.book, s.plan[l].scheme, layer, s.layout.network_rank, K,
                                                       s.checked.wire, s.updateWire(),
                                                       s.plan[l].scheme == Scheme::kSFB ? s.checked.factor_wire
                                                                                        : s.checked.kvstore.wire));
  }
  if (s.client) {
    st.max_staleness_seen = s.client->maxStalenessSeen();
    st.collective_summary = s.client->collectiveSummary();
  }
  if (s.server) {
    st.dropped_updates = s.server->droppedUpdates();
    st.late_updates = s.server->lateUpdates();
  }
  st.send_queue = s.transport.sendStats();
  return st;
}

void Session::abandon(const std::string& why) {
  Impl& s = *impl_;
  if (s.finished) return;
  s.finished = true;  // the destructor then skips finish() and its barrier
  s.failure.set(std::make_exception_ptr(Error(why)));
  s.transport.leave(why);  // the peers stop sending here and fail now, with `why`
}

void Session::finish() {
  Impl& s = *impl_;
  if (s.finished) return;
  s.finished = true;
  faultPoint(s.transport.rank(), "finish");
  waitAll();
  s.control.barrier("end of training");
  {
    std::lock_guard<std::mutex> lock(s.dispatch->mu);
    s.dispatch->server = nullptr;
    s.dispatch->client = nullptr;
    s.dispatch->stage = nullptr;
    s.dispatch->device = nullptr;
  }
  if (s.server) s.server->stop();
  s.worker = nullptr;
  s.client.reset();
  s.device.reset();
  s.failure.rethrowIfFailed();
}

}  // namespace poseidon
