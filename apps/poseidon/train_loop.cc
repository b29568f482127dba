#include "train_loop.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "checkpoint/state_file.h"
#include "comm/control_channel.h"
#include "common/digest.h"
#include "common/timeline.h"
#include "coordinator/cost_model.h"
#include "coordinator/information_book.h"
#include "coordinator/scheme_planner.h"
#include "coordinator/units.h"
#include "data/dataset.h"
#include "data/partition.h"
#include "kvstore/sgd.h"
#include "models/model_spec.h"
#include "poseidon/errors.h"
#include "poseidon/runtime.h"
#include "poseidon/torch.h"
#include "torch/model_builder.h"

#include "blas_kernels.h"
#include "checkpointing.h"
#include "emulated_compute.h"
#include "report.h"
#include "threads.h"

namespace poseidon::app {

namespace {

using Seconds = std::chrono::duration<double>;

struct Data {
  Dataset train_set, test_set;
  torch::Tensor train_x, train_y, test_x, test_y;  // views of the sets above
};

Data loadData(const TrainOptions& o, const ModelSpec& spec) {
  Data d;
  if (o.synthetic) {
    d.train_set = syntheticDataset(8192, spec.channels, spec.height, spec.width, spec.classes, o.seed);
    d.test_set = syntheticDataset(2048, spec.channels, spec.height, spec.width, spec.classes, o.seed + 1);
  } else {
    d.train_set = loadFashionMnist(o.data, true);
    d.test_set = loadFashionMnist(o.data, false);
    if (d.train_set.channels != spec.channels || d.train_set.height != spec.height ||
        d.train_set.width != spec.width || spec.classes != 10) {
      throw InputError(detail::cat("model ", spec.name, " expects input ", spec.channels, "x", spec.height, "x",
                                   spec.width, " and ", spec.classes, " classes; Fashion-MNIST is 1x28x28 with 10 "
                                   "classes (use --synthetic for other shapes)"));
    }
  }
  auto view = [](Dataset& s, torch::Tensor& x, torch::Tensor& y) {
    x = torch::from_blob(s.images.data(), {s.count, s.channels, s.height, s.width}, torch::kFloat);
    y = torch::from_blob(s.labels.data(), {s.count}, torch::kLong);
  };
  view(d.train_set, d.train_x, d.train_y);
  view(d.test_set, d.test_x, d.test_y);
  return d;
}

std::string paramDigest(torch::nn::Sequential& net) {
  Digest d;
  for (const auto& p : net->parameters()) d.update(p.data_ptr<float>(), p.numel() * sizeof(float));
  return d.hex();
}

void saveParams(torch::nn::Sequential& net, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError("cannot write --save-params file " + tmp);
    for (const auto& p : net->parameters()) out.write(reinterpret_cast<const char*>(p.data_ptr<float>()), p.numel() * sizeof(float));
    if (!out.flush()) throw InputError("cannot write --save-params file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError("cannot rename " + tmp + " to " + path);
}

// Correct predictions and count on test examples [begin, end).
std::pair<double, double> evaluate(torch::nn::Sequential& net, const Data& d, std::int64_t begin, std::int64_t end) {
  torch::NoGradGuard no_grad;
  net->eval();
  double correct = 0;
  for (std::int64_t i = begin; i < end; i += 500) {
    const std::int64_t n = std::min<std::int64_t>(500, end - i);
    auto pred = net->forward(d.test_x.narrow(0, i, n)).argmax(1);
    correct += pred.eq(d.test_y.narrow(0, i, n)).sum().item<double>();
  }
  net->train();
  return {correct, static_cast<double>(end - begin)};
}

// What the cost model says rank `rank` sends per iteration for layer l under `scheme`.
double modelBytesSent(const InformationBook& book, Scheme scheme, int l, int rank, std::int64_t K) {
  const auto& cluster = book.cluster();
  const LayerInfo& li = book.model().layers[l];
  if (scheme == Scheme::kSFB) return CostModel::sfbFloats(li.M, li.N, cluster.workers(), K) / 2 * sizeof(float);
  if (scheme == Scheme::kPS) return CostModel::psSentFloats(li.numel(), cluster, rank) * sizeof(float);
  // ADAM with sharded servers: the factors go to every other shard that holds a pair of
  // the layer; as a server, this rank sends its pairs' fresh values to the other workers.
  std::vector<bool> shard_used(cluster.shards(), false);
  double own = 0;
  for (auto key : book.pairsOfLayer(l)) {
    const KVPair& kv = book.pair(key);
    shard_used[kv.shard] = true;
    if (cluster.shardRank(kv.shard) == rank) own += static_cast<double>(kv.length);
  }
  int remote = 0;
  for (int s = 0; s < cluster.shards(); ++s) remote += shard_used[s] && cluster.shardRank(s) != rank ? 1 : 0;
  return (static_cast<double>(K) * (li.M + li.N) * remote + own * (cluster.workers() - 1)) * sizeof(float);
}

// Every rank's events into one Chrome trace, written by rank 0 (atomically: a reader never
// sees half a file).
void writeTimeline(Session& session, const std::string& path, bool lead, const std::string& model) {
  const auto all = session.control().allgather(session.timeline()->events(), "timeline");
  if (!lead) return;
  std::string text = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"" + model + "\",\"ranks\":" +
                     std::to_string(all.size()) + ",\"compute\":\"real\"},\"traceEvents\":[\n";
  for (std::size_t r = 0; r < all.size(); ++r) text += (r ? ",\n" : "") + all[r];
  text += "\n]}\n";
  writeFileAtomically(path, text);
  std::printf("poseidon: timeline written to %s (open it in https://ui.perfetto.dev or chrome://tracing)\n",
              path.c_str());
}

// Output files are refused up front if they exist: nothing already written is overwritten,
// and a finished run is not lost to a name clash at its end.
void requireNewFile(const char* flag, const std::string& path) {
  if (!path.empty() && std::ifstream(path).good()) {
    throw InputError(detail::cat(flag, " ", path, " already exists; remove it or choose another name"));
  }
}

// Test hooks for failure tests: POSEIDON_FAULT_EXIT="RANK:ITERATION" makes that rank die
// abruptly (as a crash would) when it reaches that iteration; POSEIDON_FAULT_DELAY=
// "RANK:ITERATION:MS" makes it stall that long there (a straggler).
void maybeInjectFault(int rank, std::int64_t iteration) {
  static const char* delay = std::getenv("POSEIDON_FAULT_DELAY");
  int dr = -1;
  long long dit = -1, ms = 0;
  if (delay && std::sscanf(delay, "%d:%lld:%lld", &dr, &dit, &ms) == 3 && dr == rank && dit == iteration) {
    std::fprintf(stderr, "poseidon: rank %d: POSEIDON_FAULT_DELAY: stalling %lld ms at iteration %lld\n", rank, ms, dit);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  static const char* spec = std::getenv("POSEIDON_FAULT_EXIT");
  if (!spec) return;
  int r = -1;
  long long it = -1;
  if (std::sscanf(spec, "%d:%lld", &r, &it) == 2 && r == rank && it == iteration) {
    std::fprintf(stderr, "poseidon: rank %d: POSEIDON_FAULT_EXIT: dying at iteration %lld\n", rank, it);
    std::_Exit(17);
  }
}

class ProgressPrinter {
 public:
  ProgressPrinter(bool enabled, int every) : enabled_(enabled), every_(every) {}
  void iteration(std::int64_t it, std::int64_t total, std::int64_t epoch, std::int64_t epochs, double loss,
                 double s_per_iter, double images_per_iter, bool force, std::uint64_t dropped) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    const bool due = every_ > 0 ? (it + 1) % every_ == 0 : Seconds(now - last_).count() >= 5.0;
    if (!due && !force) return;
    last_ = now;
    std::printf("poseidon: epoch %lld/%lld iter %lld/%lld loss %.4f %.3f s/iter %.1f images/s",
                static_cast<long long>(epoch + 1), static_cast<long long>(epochs), static_cast<long long>(it + 1),
                static_cast<long long>(total), loss, s_per_iter, s_per_iter > 0 ? images_per_iter / s_per_iter : 0.0);
    // Seen by this rank's shard: a straggler shows up at every shard it is late for.
    if (dropped > 0) std::printf(", %llu straggler updates dropped", static_cast<unsigned long long>(dropped));
    std::printf("\n");
    std::fflush(stdout);
  }

 private:
  bool enabled_;
  int every_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

namespace {
int train(const TrainOptions& o, Runtime* runtime);
}  // namespace

int runTrain(const TrainOptions& o, int* argc, char*** argv) {
  if (o.baseline) {
    const char* ranks = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (ranks && std::atoi(ranks) > 1) {
      throw InputError("--baseline runs a plain LibTorch loop in one process; start it without mpirun -np > 1");
    }
    return train(o, nullptr);
  }
  Runtime runtime(argc, argv);
  try {
    return train(o, &runtime);
  } catch (const std::exception& e) {
    if (runtime.size() == 1) throw;
    // Other ranks may be waiting for this one: end the whole job now rather than let them
    // run into their timeouts (and MPI_Finalize would wait for them).
    // Most waits already say which rank timed out; others get this rank's number.
    if (std::string(e.what()).rfind("rank ", 0) == 0) {
      std::fprintf(stderr, "poseidon: error: %s\n", e.what());
    } else {
      std::fprintf(stderr, "poseidon: error: rank %d: %s\n", runtime.rank(), e.what());
    }
    std::fflush(stderr);
    runtime.abortJob(2);
  }
}

namespace {

int train(const TrainOptions& o, Runtime* runtime) {
  if (o.batch <= 0) throw InputError(detail::cat("--batch ", o.batch, ": the batch must hold at least one example"));
  if (o.epochs <= 0 && o.iterations <= 0) throw InputError("give --epochs or --iterations a positive value");
  if (o.verify_every < 0) throw InputError("--verify must not be negative");
  if (o.checkpoint_every < 0) throw InputError("--checkpoint-every must not be negative");
  if ((o.checkpoint_every > 0) != !o.checkpoint_dir.empty()) {
    throw InputError("--checkpoint-dir and --checkpoint-every go together: give both");
  }
  if (o.baseline && (!o.checkpoint_dir.empty() || !o.resume.empty())) {
    throw InputError("--baseline does not checkpoint; drop --checkpoint-dir and --resume");
  }
  requireNewFile("--timeline", o.timeline);
  if (!o.timeline.empty() && o.baseline) throw InputError("--timeline records Poseidon's work; drop --baseline");
  requireNewFile("--save-params", o.save_params);
  const ModelSpec spec = o.model_file.empty() ? builtinModel(o.model) : parseModelFile(o.model_file);
  const int threads = setComputeThreads(o.threads);
  const std::string blas = blasKernels();
  const int rank = runtime ? runtime->rank() : 0;
  const bool lead = rank == 0;

  Options session_options = o.session;
  if (!o.lr_given) session_options.lr = spec.lr > 0 ? static_cast<float>(spec.lr) : 0.01f;
  session_options.batch = o.batch;
  session_options.wfbp = !o.no_wfbp;
  session_options.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  if (o.straggler_timeout_s < 0) throw InputError("--straggler-timeout must not be negative");
  if (o.straggler_timeout_s > 0 && o.straggler_timeout_s >= o.timeout_s) {
    throw InputError("--straggler-timeout must be shorter than --timeout, or no step would ever go ahead");
  }
  session_options.straggler_timeout = std::chrono::milliseconds(static_cast<long long>(o.straggler_timeout_s * 1000));
  if (!o.bandwidth.empty()) session_options.bandwidth = parseBandwidth(o.bandwidth, "--bandwidth");
  if (o.gflops < 0) throw InputError("--gflops must be positive");
  session_options.gemm_flops = o.gflops * 1e9;
  parseSchemeMode(session_options.scheme);  // a bad name fails here, before any data is read
  parseCostRule(session_options.cost_model);
  if (!o.emulate_compute.empty()) {
    if (!runtime) throw InputError("--emulate-compute emulates Poseidon's ranks; drop --baseline");
    if (o.iterations <= 0) throw InputError("--emulate-compute needs --iterations (there is no data to make epochs of)");
    return runEmulated(o, *runtime, spec, session_options, o.iterations);
  }
  requireNewFile("--profile-out", o.profile_out);

  Data data = loadData(o, spec);
  torch::manual_seed(o.seed);
  torch::nn::Sequential net = buildSequential(spec);

  // The run's length, known before the session: the learning-rate schedule spans it.
  const int workers = runtime ? std::max(1, runtime->size() - session_options.server_ranks) : 1;
  Partition partition(data.train_set.count, workers, std::min(rank, workers - 1), o.batch, o.seed);
  const std::int64_t per_epoch = partition.batchesPerEpoch();
  const std::int64_t total = o.iterations > 0 ? o.iterations : o.epochs * per_epoch;
  const std::int64_t epochs = (total + per_epoch - 1) / per_epoch;
  if (o.lr_schedule == "linear") {
    session_options.lr_decay_iterations = total;
  } else if (o.lr_schedule != "constant") {
    throw InputError("--lr-schedule " + o.lr_schedule + ": use linear or constant");
  }
  const SgdOptions schedule{session_options.lr, session_options.momentum, session_options.weight_decay,
                            session_options.lr_decay_iterations};

  // A resumed run starts at its checkpoint's iteration, on every rank alike.
  const auto resume = RunCheckpoints::findResume(o.resume, runtime ? runtime->size() : 1);
  const std::int64_t first = resume ? static_cast<std::int64_t>(resume->iteration) : 0;
  if (first >= total) {
    throw InputError(detail::cat("the checkpoint in ", resume->folder, " is at iteration ", first,
                                 " and this run has ", total, " iterations: nothing left to do"));
  }
  session_options.start_iteration = static_cast<std::uint64_t>(first);
  session_options.timeline = !o.timeline.empty() || !o.profile_out.empty();
  std::unique_ptr<TorchModel> model;
  std::unique_ptr<torch::optim::SGD> optimizer;
  session_options.agreement = detail::cat("epochs=", o.epochs, " iterations=", o.iterations, " seed=", o.seed,
                                          " synthetic=", o.synthetic, " eval=", !o.no_eval, " verify=", o.verify_every,
                                          " server_ranks=", session_options.server_ranks, " shards=", session_options.shards,
                                          " pair=", session_options.kv_pair_bytes, " train=", data.train_set.count);
  if (o.baseline) {
    optimizer = std::make_unique<torch::optim::SGD>(
        net->parameters(), torch::optim::SGDOptions(session_options.lr).momentum(session_options.momentum).weight_decay(session_options.weight_decay));
  } else {
    model = std::make_unique<TorchModel>(runtime->transport(), net, spec.name, session_options);
  }
  Session* session = model ? &model->session() : nullptr;
  const bool worker = !session || session->isWorker();
  POSEIDON_ENFORCE(!session || session->workers() == workers, "worker count");
  const ModelInfo info = describeSequential(net, spec.name);
  // Dropout differs per worker; the initial parameters were already made from the seed.
  torch::manual_seed(o.seed + 1 + static_cast<std::uint64_t>(rank));
  std::unique_ptr<RunCheckpoints> checkpoints;
  if (session) {
    // What a resumed run must share with the run that saved: everything that shapes the
    // state or the arithmetic after it (the plan is included: --cost-model time measures).
    std::string schemes;
    for (const auto& p : session->plan()) schemes += std::string(schemeName(p.scheme)) + ",";
    checkpoints = std::make_unique<RunCheckpoints>(
        *session, o.checkpoint_dir, o.checkpoint_every,
        detail::cat(info.describe(), " | workers=", workers, " batch=", o.batch, " seed=", o.seed, " total=", total,
                    " lr=", session_options.lr, " schedule=", o.lr_schedule, " momentum=", session_options.momentum,
                    " wd=", session_options.weight_decay, " schemes=", schemes, " server_ranks=",
                    session_options.server_ranks, " shards=", session_options.shards, " pair=",
                    session_options.kv_pair_bytes, " fusion=", session_options.fusion_bytes, " synthetic=", o.synthetic,
                    " train=", data.train_set.count));
    if (resume) checkpoints->restore(*resume);
  }
  // Where every rank stops together: evaluations (after each epoch and at the end) and
  // replica checks (--verify). Server-only ranks join these collectives too.
  struct SyncPoint {
    bool eval = false, verify = false, checkpoint = false;
  };
  std::map<std::int64_t, SyncPoint> sync_points;  // by iterations done
  if (!o.no_eval) {
    for (std::int64_t e = 1; e * per_epoch <= total; ++e) sync_points[e * per_epoch].eval = true;
    sync_points[total].eval = true;
  }
  for (std::int64_t v = o.verify_every; o.verify_every > 0 && session && v <= total; v += o.verify_every) {
    sync_points[v].verify = true;
  }
  for (std::int64_t c = o.checkpoint_every; checkpoints && o.checkpoint_every > 0 && c <= total; c += o.checkpoint_every) {
    sync_points[c].checkpoint = true;
  }
  // A resumed run has passed the earlier ones.
  sync_points.erase(sync_points.begin(), sync_points.upper_bound(first));

  std::string scheme_summary = "local";
  if (session) {
    std::map<std::string, int> counts;
    for (const auto& p : session->plan()) ++counts[schemeName(p.scheme)];
    scheme_summary = detail::cat(session_options.scheme, "/", session_options.cost_model, " (");
    for (const auto& [name, n] : counts) scheme_summary += detail::cat(n, " ", name, " ");
    scheme_summary.back() = ')';
  }
  if (lead) {
    std::printf("poseidon: training %s (%.2f M parameters, %zu layers with parameters) on %d worker%s%s, "
                "batch %lld per worker, lr %g (%s), %lld iterations, schemes %s, WFBP %s, %d compute thread%s per rank%s%s\n",
                spec.name.c_str(), info.numel() / 1e6, info.layers.size(), workers, workers == 1 ? "" : "s",
                o.baseline ? " (plain LibTorch baseline)"
                           : detail::cat(", ", session->book().cluster().shards(),
                                         session->book().cluster().shards() == 1 ? " shard, " : " shards, ",
                                         session->book().pairs().size(), " KV pairs").c_str(),
                static_cast<long long>(o.batch), static_cast<double>(session_options.lr), o.lr_schedule.c_str(),
                static_cast<long long>(total),
                scheme_summary.c_str(),
                o.no_wfbp ? "off" : "on", threads, threads == 1 ? "" : "s", o.synthetic ? ", synthetic data" : "",
                blas.empty() ? "" : (", OpenBLAS " + blas + " kernels").c_str());
    if (session && !session->collectiveSummary().empty()) {
      std::printf("poseidon: %s\n", session->collectiveSummary().c_str());
    }
    if (session && (session->rates().bandwidth_bytes_per_s > 0 || session->rates().gemm_flops_per_s > 0)) {
      std::printf("poseidon: cost model rates: link %.1f MB/s, GEMM %.1f GFLOP/s\n",
                  session->rates().bandwidth_bytes_per_s / 1e6, session->rates().gemm_flops_per_s / 1e9);
    }
    std::fflush(stdout);
  }

  ProgressPrinter progress(lead && worker, o.log_every);
  std::vector<double> iter_seconds;
  double last_loss = 0;
  std::optional<double> accuracy;
  const std::uint64_t bytes_before = session ? session->bytesSent() : 0;
  std::vector<std::uint64_t> layer_bytes_before(info.layers.size(), 0);
  for (std::size_t l = 0; session && l < info.layers.size(); ++l) layer_bytes_before[l] = session->bytesSentForLayer(static_cast<int>(l));

  auto atSyncPoint = [&](std::int64_t done, const SyncPoint& what) {
    const bool eval = what.eval, verify = what.verify;
    if (worker && model) model->synchronize();
    if (!worker) session->serveUntil(static_cast<std::uint64_t>(done));
    if (what.checkpoint) checkpoints->save(done);
    if (verify) {
      const auto digests = session->control().allgather(worker ? session->replicaDigest() : "", "replica check");
      for (int r = 1; r < workers; ++r) {
        if (digests[r] != digests[0]) {
          throw Error(detail::cat("replicated layers (SFB, allreduce) diverged by iteration ", done, ": worker 0 has digest ", digests[0],
                                  ", worker ", r, " has ", digests[r]));
        }
      }
    }
    if (!eval) return;
    double correct = 0, count = 0;
    if (worker) {
      const std::int64_t n = data.test_set.count;
      std::tie(correct, count) = evaluate(net, data, n * rank / workers, n * (rank + 1) / workers);
    }
    if (session) {
      const auto sum = session->control().allreduceSum({correct, count}, "test accuracy");
      correct = sum[0], count = sum[1];
    }
    accuracy = 100.0 * correct / count;
    if (lead) {
      std::printf("poseidon: after %lld iterations: test accuracy %.2f%% (%lld images)\n", static_cast<long long>(done),
                  *accuracy, static_cast<long long>(count));
      std::fflush(stdout);
    }
  };

  if (worker) {
    auto start = std::chrono::steady_clock::now();
    for (std::int64_t it = first; it < total; ++it) {
      maybeInjectFault(rank, it);
      const std::int64_t epoch = it / per_epoch;
      const auto idx = partition.batch(epoch, it % per_epoch);
      auto index = torch::from_blob(const_cast<std::int64_t*>(idx.data()), {static_cast<std::int64_t>(idx.size())}, torch::kLong);
      auto x = data.train_x.index_select(0, index);
      auto y = data.train_y.index_select(0, index);
      torch::Tensor loss;
      if (model) {
        loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        loss.backward();
        model->step();
      } else {
        optimizer->zero_grad();
        loss = torch::nn::functional::cross_entropy(net->forward(x), y);
        loss.backward();
        // The same schedule the servers apply, computed the same way.
        static_cast<torch::optim::SGDOptions&>(optimizer->param_groups()[0].options())
            .lr(static_cast<double>(schedule.at(static_cast<std::uint64_t>(it)).lr));
        optimizer->step();
      }
      last_loss = loss.item<double>();
      const auto point = sync_points.find(it + 1);
      if (model && (point != sync_points.end() || it + 1 == total)) model->synchronize();
      iter_seconds.push_back(Seconds(std::chrono::steady_clock::now() - start).count());
      progress.iteration(it, total, epoch, epochs, last_loss, median(iter_seconds), static_cast<double>(o.batch * workers),
                         point != sync_points.end() || it + 1 == total, session ? session->droppedUpdates() : 0);
      if (point != sync_points.end()) atSyncPoint(it + 1, point->second);
      start = std::chrono::steady_clock::now();
    }
  } else {
    for (const auto& [done, what] : sync_points) atSyncPoint(done, what);
    session->serveUntil(static_cast<std::uint64_t>(total));
  }

  TrainReport report;
  report.ranks = runtime ? runtime->size() : 1;
  report.workers = workers;
  report.model = spec.name;
  report.scheme = o.baseline ? "local" : session_options.scheme;
  report.cost_model = session_options.cost_model;
  report.wfbp = !o.no_wfbp;
  report.baseline = o.baseline;
  report.synthetic = o.synthetic;
  report.threads = threads;
  report.blas = blas;
  report.batch = o.batch;
  report.lr = session_options.lr;
  report.iterations = total;
  setThroughput(report, iter_seconds, workers, o.batch);
  report.test_accuracy = accuracy;
  report.param_digest = paramDigest(net);
  report.train_loss = last_loss;

  if (session) {
    const double iters = static_cast<double>(total - first);
    const int L = static_cast<int>(info.layers.size());
    // Per worker: loss, then per layer the bytes sent and the cost model's figure for what
    // a node sends under the layer's scheme.
    std::vector<double> mine(1 + 2 * L, 0.0);
    if (worker) {
      mine[0] = last_loss;
      for (int l = 0; l < L; ++l) {
        const auto& plan = session->plan()[l];
        mine[1 + 2 * l] = (session->bytesSentForLayer(l) - layer_bytes_before[l]) / iters;
        mine[2 + 2 * l] = modelBytesSent(session->book(), plan.scheme, l, rank, o.batch);
      }
    }
    const auto sum = session->control().allreduceSum(mine, "final statistics");
    report.train_loss = sum[0] / workers;
    for (int l = 0; l < L; ++l) {
      const auto& li = info.layers[l];
      const auto& plan = session->plan()[l];
      LayerReport lr{li.name, layerKindName(li.kind), li.M, li.N, li.numel(), schemeName(plan.scheme),
                     sum[1 + 2 * l] / workers, sum[2 + 2 * l] / workers, plan.reason};
      report.bytes_model_per_iter += lr.bytes_model_per_iter;
      report.layers.push_back(lr);
    }
    const auto all = session->control().allreduceSum({worker ? (session->bytesSent() - bytes_before) / iters : 0.0},
                                                     "bytes sent");
    report.bytes_sent_per_iter = all[0] / workers;
    const auto stragglers = session->control().allreduceSum(
        {static_cast<double>(session->droppedUpdates()), static_cast<double>(session->lateUpdates())}, "stragglers");
    report.dropped_updates = static_cast<std::uint64_t>(stragglers[0]);
    if (!o.timeline.empty()) writeTimeline(*session, o.timeline, lead, spec.name);
    if (!o.profile_out.empty()) writeProfile(*session, o.profile_out, o.batch, spec.name);
    report.staleness = session_options.staleness;
    for (const auto& seen : session->control().allgather(std::to_string(session->maxStalenessSeen()), "staleness")) {
      report.max_staleness_seen = std::max<std::uint64_t>(report.max_staleness_seen, std::stoull(seen));
    }
    report.late_updates = static_cast<std::uint64_t>(stragglers[1]);
    // Every worker's replica must end with the same parameters; a difference is a bug, not
    // noise. (A server-only rank holds fresh values only for its own shard's pairs.)
    const auto digests = session->control().allgather(report.param_digest, "final parameter digests");
    for (int r = 0; r < workers; ++r) {
      if (digests[r] != digests[0]) {
        throw Error(detail::cat("parameters differ across ranks after training: rank 0 has digest ", digests[0],
                                ", rank ", r, " has ", digests[r]));
      }
    }
    model->finish();
  } else {
    for (const auto& li : info.layers) {
      report.layers.push_back(LayerReport{li.name, layerKindName(li.kind), li.M, li.N, li.numel(), "local", 0, 0, ""});
    }
  }

  if (lead) {
    if (!o.save_params.empty()) saveParams(net, o.save_params);
    std::printf("poseidon: done: %lld iterations, %.3f s/iter (median), %.1f images/s, final loss %.4f, "
                "%.1f MB sent per iteration per worker, parameter digest %s\n",
                static_cast<long long>(total), report.s_per_iter_median, report.images_per_s, report.train_loss,
                report.bytes_sent_per_iter / 1e6, report.param_digest.c_str());
    if (o.json) std::printf("%s\n", toJson(report).c_str());
    std::fflush(stdout);
  }
  model.reset();
  return 0;
}

}  // namespace
}  // namespace poseidon::app
