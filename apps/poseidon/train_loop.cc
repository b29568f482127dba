#include "train_loop.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>

#include "coordinator/scheme_planner.h"
#include "data/partition.h"
#include "poseidon/errors.h"
#include "poseidon/runtime.h"
#include "poseidon/timeline.h"
#include "poseidon/torch.h"

#include "blas_kernels.h"
#include "checkpointing.h"
#include "emulated_compute.h"
#include "option_flags.h"
#include "progress.h"
#include "report.h"
#include "session_report.h"
#include "threads.h"
#include "train_data.h"
#include "train_net.h"
#include "train_step.h"

namespace poseidon::app {

namespace {

using Seconds = std::chrono::duration<double>;

// Where every rank stops together: evaluations (after each epoch and at the end), replica
// checks (--verify) and checkpoints. Server-only ranks join these collectives too.
struct SyncPoint {
  bool eval = false, verify = false, checkpoint = false;
};

// The compute set-up of this process, for the start-up line and the report.
struct Compute {
  int threads = 1;
  std::string blas;
};

// One run of `poseidon train`, built up by the steps train() calls in order.
class TrainRun {
 public:
  TrainRun(const TrainOptions& o, Runtime* runtime, NetChoice choice, Compute compute);

  void loadDataAndNet();  // the data, the net from the seed, the run's iterations
  void connect();         // the local optimizer, the Poseidon model, checkpoints (resume)
  void planSyncPoints();
  void printStart() const;
  void trainOrServe();
  TrainReport finish();  // collective: figures from every rank, the digest check
  void printDone(const TrainReport& report) const;

 private:
  Session* session() const { return model_ ? &model_->session() : nullptr; }
  bool worker() const { return !model_ || model_->session().layout().worker; }
  bool checkpointing() const { return !o_.checkpoint_dir.empty() || !o_.resume.empty(); }
  std::string agreement() const;
  std::string checkpointConfig() const;
  std::string checkpointFlags() const;
  std::string schemeSummary() const;
  std::string optimizerSummary() const;
  void trainIterations();
  void atSyncPoint(std::int64_t done, const SyncPoint& what);
  void verifyReplicas(std::int64_t done);
  void evaluateTestSet(std::int64_t done);

  const TrainOptions& o_;
  Runtime* runtime_;  // null for --baseline
  const NetChoice choice_;
  const Compute compute_;
  const int rank_;
  const int workers_;
  const bool lead_;

  Data data_;
  std::unique_ptr<TrainNet> net_;
  std::unique_ptr<Partition> partition_;
  std::int64_t per_epoch_ = 0, total_ = 0, epochs_ = 0, first_ = 0;
  std::optional<CheckpointInfo> resume_;
  Options options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;  // gradient mode and --baseline
  std::unique_ptr<TorchModel> model_;                   // null for --baseline
  ModelInfo info_;
  std::unique_ptr<RunCheckpoints> checkpoints_;
  std::map<std::int64_t, SyncPoint> sync_points_;  // by iterations done

  std::vector<double> iter_seconds_;
  torch::Tensor last_loss_;  // on the model's device: read when printed and at the end
  double lastLoss() const { return last_loss_.defined() ? last_loss_.item<double>() : 0.0; }
  std::optional<double> accuracy_;
  BytesSent bytes_before_;
};

TrainRun::TrainRun(const TrainOptions& o, Runtime* runtime, NetChoice choice, Compute compute)
    : o_(o),
      runtime_(runtime),
      choice_(std::move(choice)),
      compute_(std::move(compute)),
      rank_(runtime ? runtime->rank() : 0),
      workers_(runtime ? std::max(1, runtime->size() - o.session.server_ranks) : 1),
      lead_(rank_ == 0) {}

void TrainRun::loadDataAndNet() {
  data_ = loadData(o_, choice_);
  torch::manual_seed(o_.seed);
  net_ = std::make_unique<TrainNet>(choice_);
  net_->toDevice(o_.device);
  // The run's length, known before the session: the learning-rate schedule spans it.
  partition_ =
      std::make_unique<Partition>(data_.train_set.count, workers_, std::min(rank_, workers_ - 1), o_.batch, o_.seed);
  per_epoch_ = partition_->batchesPerEpoch();
  if (per_epoch_ == 0) {
    throw InputError(detail::cat("--batch ", o_.batch, " on ", workers_, " workers takes more than the ",
                                 data_.train_set.count, " training examples"));
  }
  total_ = o_.iterations > 0 ? o_.iterations : o_.epochs * per_epoch_;
  epochs_ = (total_ + per_epoch_ - 1) / per_epoch_;
  // A resumed run starts at its checkpoint's iteration, on every rank alike.
  resume_ = RunCheckpoints::findResume(o_.resume, runtime_ ? runtime_->size() : 1);
  first_ = resume_ ? static_cast<std::int64_t>(resume_->iteration) : 0;
  if (first_ >= total_) {
    throw InputError(detail::cat("the checkpoint in ", resume_->folder, " is at iteration ", first_,
                                 " and this run has ", total_, " iterations: nothing left to do"));
  }
  options_ = o_.sessionOptions(choice_.recommendedLr(o_.optimizer), total_);
  options_.start_iteration = static_cast<std::uint64_t>(first_);
  options_.agreement = agreement();
  // The loop reads no parameter between a step and the next forward (its evaluations and
  // checkpoints synchronize first): the fresh values may keep arriving during the forward.
  options_.overlap_step = true;
}

// The flags every rank must share beyond the session's options (runConfiguration has those).
std::string TrainRun::agreement() const {
  return detail::cat("epochs=", o_.epochs, " iterations=", o_.iterations, " eval=", !o_.no_eval,
                     " verify=", o_.verify_every, " ", checkpointFlags());
}

// The flags a resumed run must share with the saved one beyond the session's: the data and
// its order, and the optimizer whose state the checkpoint holds.
std::string TrainRun::checkpointFlags() const {
  return detail::cat("seed=", o_.seed, " synthetic=", o_.synthetic, " train=", data_.train_set.count,
                     " optimizer=", o_.optimizer);
}

void TrainRun::connect() {
  // The optimizer's parameters are taken before the model exists: it turns off
  // requires_grad of weights that go by sufficient factors (Poseidon fills their .grad).
  if (o_.baseline || options_.gradient_mode) {
    optimizer_ = makeOptimizer(o_.optimizer, net_->trainableParameters(), options_);
  }
  if (!o_.baseline) {
    // The probe's example: the first batch this run trains on.
    const auto example =
        batchOf(data_, partition_->batch(first_ / per_epoch_, first_ % per_epoch_)).first.to(net_->device());
    model_ = net_->connect(runtime_->transport(), options_, example);
    POSEIDON_ENFORCE(model_->session().layout().workers == workers_, "worker count");
  }
  info_ = model_ ? model_->info() : net_->describe();
  // Dropout differs per worker; the initial parameters were already made from the seed.
  torch::manual_seed(o_.seed + 1 + static_cast<std::uint64_t>(rank_));
  if (!model_) return;
  checkpoints_ = std::make_unique<RunCheckpoints>(*model_, checkpointing() ? optimizer_.get() : nullptr,
                                                  o_.checkpoint_dir, o_.checkpoint_every, checkpointConfig());
  if (resume_) checkpoints_->restore(*resume_);
}

// What a resumed run must share with the run that saved: the session's settings, model,
// plan and nodes (Session::resumeConfiguration) and this command's own.
std::string TrainRun::checkpointConfig() const {
  return session()->resumeConfiguration("poseidon train " + checkpointFlags());
}

void TrainRun::planSyncPoints() {
  if (!o_.no_eval) {
    for (std::int64_t e = 1; e * per_epoch_ <= total_; ++e) sync_points_[e * per_epoch_].eval = true;
    sync_points_[total_].eval = true;
  }
  for (std::int64_t v = o_.verify_every; o_.verify_every > 0 && model_ && v <= total_; v += o_.verify_every) {
    sync_points_[v].verify = true;
  }
  for (std::int64_t c = o_.checkpoint_every; model_ && o_.checkpoint_every > 0 && c <= total_;
       c += o_.checkpoint_every) {
    sync_points_[c].checkpoint = true;
  }
  // A resumed run has passed the earlier ones.
  sync_points_.erase(sync_points_.begin(), sync_points_.upper_bound(first_));
}

std::string TrainRun::schemeSummary() const {
  if (!model_) return "local";
  std::map<std::string, int> counts;
  for (const auto& p : session()->plan()) ++counts[schemeName(p.scheme)];
  std::string s = detail::cat(options_.scheme, "/", options_.cost_model, " (");
  for (const auto& [name, n] : counts) s += detail::cat(n, " ", name, " ");
  s.back() = ')';
  return s;
}

std::string TrainRun::optimizerSummary() const {
  if (o_.baseline) return o_.optimizer + " (local)";
  if (!options_.gradient_mode) return "sgd (on the servers)";
  return o_.optimizer + " (gradient mode)";
}

void TrainRun::printStart() const {
  if (!lead_) return;
  const std::string where =
      model_ ? detail::cat(", ", session()->layout().shards, session()->layout().shards == 1 ? " shard, " : " shards, ",
                           session()->layout().kv_pairs, " KV pairs")
             : " (plain LibTorch baseline)";
  const std::string passes = options_.backward_passes_per_step > 1
                                 ? detail::cat(" in ", options_.backward_passes_per_step, " backward passes")
                                 : "";
  std::printf(
      "poseidon: training %s (%.2f M parameters, %zu layers with parameters) on %d worker%s%s, "
      "batch %lld per worker%s, optimizer %s, lr %g (%s), %lld iterations, schemes %s, WFBP %s, "
      "%d compute thread%s per rank%s%s\n",
      net_->name().c_str(), info_.numel() / 1e6, info_.layers.size(), workers_, workers_ == 1 ? "" : "s", where.c_str(),
      static_cast<long long>(o_.batch), passes.c_str(), optimizerSummary().c_str(), static_cast<double>(options_.lr),
      o_.lr_schedule.c_str(), static_cast<long long>(total_), schemeSummary().c_str(), options_.wfbp ? "on" : "off",
      compute_.threads, compute_.threads == 1 ? "" : "s", o_.synthetic ? ", synthetic data" : "",
      compute_.blas.empty() ? "" : (", OpenBLAS " + compute_.blas + " kernels").c_str());
  Session* s = session();
  if (!net_->device().is_cpu()) {
    std::printf("poseidon: on %s (rank 0's; each rank its local rank's GPU), gradients through pinned host memory\n",
                net_->device().str().c_str());
  }
  const std::string collectives = s ? s->stats().collective_summary : "";
  if (!collectives.empty()) std::printf("poseidon: %s\n", collectives.c_str());
  if (s && !s->layout().node_summary.empty()) std::printf("poseidon: %s\n", s->layout().node_summary.c_str());
  if (s && (s->rates().bandwidth_bytes_per_s > 0 || s->rates().gemm_flops_per_s > 0)) {
    std::printf("poseidon: cost model rates: link %.1f MB/s, GEMM %.1f GFLOP/s\n",
                s->rates().bandwidth_bytes_per_s / 1e6, s->rates().gemm_flops_per_s / 1e9);
  }
  std::fflush(stdout);
}

void TrainRun::trainOrServe() {
  if (model_) bytes_before_ = bytesSentSoFar(*session());
  if (worker()) {
    trainIterations();
    return;
  }
  for (const auto& [done, what] : sync_points_) atSyncPoint(done, what);
  session()->serveUntil(static_cast<std::uint64_t>(total_));
}

void TrainRun::trainIterations() {
  TrainStep step(*net_, model_.get(), optimizer_.get(), options_);
  ProgressPrinter progress(lead_, o_.log_every);
  auto start = std::chrono::steady_clock::now();
  double cpu_start = Timeline::threadCpuMs();
  for (std::int64_t it = first_; it < total_; ++it) {
    maybeInjectFault(rank_, it);
    const std::int64_t epoch = it / per_epoch_;
    const auto [x, y] = batchOf(data_, partition_->batch(epoch, it % per_epoch_));
    last_loss_ = step.run(it, x.to(net_->device()), y.to(net_->device()));
    const auto point = sync_points_.find(it + 1);
    const bool stop = point != sync_points_.end() || it + 1 == total_;
    if (model_ && stop) model_->synchronize();
    const auto end = std::chrono::steady_clock::now();
    iter_seconds_.push_back(Seconds(end - start).count());
    // The whole step, so a profile (--profile-out) can tell the time outside the layers.
    // And the compute thread's CPU time in it: what the simulator's host CPU bound counts.
    if (Timeline* tl = model_ ? session()->timeline() : nullptr) {
      tl->span("loop", "iteration", "iteration", start, end);
      tl->sample("cpu iteration", Timeline::threadCpuMs() - cpu_start);
    }
    progress.iteration(
        it, total_, epoch, epochs_, [this] { return lastLoss(); }, median(iter_seconds_),
        static_cast<double>(o_.batch * workers_), stop,
        [this]() -> std::uint64_t { return model_ ? session()->stats().dropped_updates : 0; });
    if (point != sync_points_.end()) atSyncPoint(it + 1, point->second);
    start = std::chrono::steady_clock::now();
    cpu_start = Timeline::threadCpuMs();
  }
}

// Workers arrive here synchronized (trainIterations); server-only ranks catch up.
void TrainRun::atSyncPoint(std::int64_t done, const SyncPoint& what) {
  if (!worker()) session()->serveUntil(static_cast<std::uint64_t>(done));
  if (what.checkpoint) checkpoints_->save(done);
  if (what.verify) verifyReplicas(done);
  if (what.eval) evaluateTestSet(done);
}

void TrainRun::verifyReplicas(std::int64_t done) {
  const auto digests = session()->control().allgather(worker() ? session()->replicaDigest() : "", "replica check");
  for (int r = 1; r < workers_; ++r) {
    if (digests[r] != digests[0]) {
      throw Error(detail::cat("replicated layers (SFB, allreduce, PS on a 16-bit wire) diverged by iteration ", done,
                              ": worker 0 has digest ", digests[0], ", worker ", r, " has ", digests[r]));
    }
  }
}

// Each worker evaluates its share of the test set (after synchronize(): the same
// parameters and buffers everywhere); the counts are summed over ranks.
void TrainRun::evaluateTestSet(std::int64_t done) {
  double correct = 0, count = 0;
  if (worker()) {
    const std::int64_t n = data_.test_set.count;
    std::tie(correct, count) = evaluate(*net_, data_, n * rank_ / workers_, n * (rank_ + 1) / workers_);
  }
  if (model_) {
    const auto sum = session()->control().allreduceSum({correct, count}, "test accuracy");
    correct = sum[0], count = sum[1];
  }
  accuracy_ = 100.0 * correct / count;
  if (lead_) {
    std::printf("poseidon: after %lld iterations: test accuracy %.2f%% (%lld images)\n", static_cast<long long>(done),
                *accuracy_, static_cast<long long>(count));
    std::fflush(stdout);
  }
}

TrainReport TrainRun::finish() {
  TrainReport r;
  r.ranks = runtime_ ? runtime_->size() : 1;
  r.workers = workers_;
  r.model = net_->name();
  r.options = options_;
  r.baseline = o_.baseline;
  r.synthetic = o_.synthetic;
  r.threads = compute_.threads;
  r.blas = compute_.blas;
  r.batch = o_.batch;
  r.iterations = total_;
  setThroughput(r, iter_seconds_, workers_, o_.batch);
  r.test_accuracy = accuracy_;
  r.param_digest = model_ ? model_->digest() : net_->digest();
  r.train_loss = lastLoss();
  if (!model_) {
    for (const auto& li : info_.layers) {
      r.layers.push_back(LayerReport{li.name, layerKindName(li.kind), li.M, li.N, li.numel(), "local", 0, 0, ""});
    }
    return r;
  }
  Session& s = *session();
  gatherSessionFigures(r, s, info_, bytes_before_, static_cast<double>(total_ - first_), worker(), lastLoss());
  if (!o_.timeline.empty()) writeTimeline(s, o_.timeline, net_->name());
  if (!o_.profile_out.empty()) writeProfile(s, o_.profile_out, o_.batch);
  checkDigestsAgree(s, r.param_digest);
  model_->finish();
  return r;
}

void TrainRun::printDone(const TrainReport& r) const {
  if (!lead_) return;
  if (!o_.save_params.empty()) net_->saveParameters(o_.save_params);
  std::printf(
      "poseidon: done: %lld iterations, %.3f s/iter (median), %.1f images/s, final loss %.4f, "
      "%.1f MB sent per iteration per %s, parameter digest %s\n",
      static_cast<long long>(total_), r.s_per_iter_median, r.images_per_s, r.train_loss, r.bytes_sent_per_iter / 1e6,
      r.bytes_per_node ? "node" : "worker", r.param_digest.c_str());
  if (o_.json) std::printf("%s\n", toJson(r).c_str());
  std::fflush(stdout);
}

// --emulate-compute: the Sequential's layers with waits in place of compute.
int emulate(const TrainOptions& o, Runtime& runtime, const NetChoice& net) {
  if (!net.spec) {
    throw InputError("--emulate-compute emulates Sequential models (fcnet, convnet, mlp, --model-file), not " +
                     net.name);
  }
  Options options = o.sessionOptions(net.sgd_lr, /*total=*/0);
  options.timeline = false;  // the emulation records no trace
  return runEmulated(o, runtime, *net.spec, options, o.iterations);
}

int train(const TrainOptions& o, Runtime* runtime) {
  const NetChoice net = chooseNet(o);
  const Compute compute{setComputeThreads(o.threads), blasKernels()};
  if (!o.emulate_compute.empty()) return emulate(o, *runtime, net);
  TrainRun run(o, runtime, net, compute);
  run.loadDataAndNet();
  run.connect();
  run.planSyncPoints();
  run.printStart();
  run.trainOrServe();
  const TrainReport report = run.finish();
  run.printDone(report);
  return 0;
}

// A rank whose timeout names only silent shards (which may be waiting on the stalled rank
// in turn) or every peer at once gives the ranks that saw the stalled one directly the
// time to end the job with the error that names it (CulpritTimeout::kIndirectWitnessGrace).
void letTheDirectWitnessSpeak(const std::exception& e) {
  const auto* culprit = dynamic_cast<const CulpritTimeout*>(&e);
  if (culprit && !culprit->namesWorker()) std::this_thread::sleep_for(CulpritTimeout::kIndirectWitnessGrace);
}

}  // namespace

int runTrain(const TrainOptions& o, int* argc, char*** argv) {
  o.validate();
  if (o.baseline) return train(o, nullptr);
  Runtime runtime(argc, argv);
  try {
    return train(o, &runtime);
  } catch (const std::exception& e) {
    if (runtime.size() == 1) throw;
    letTheDirectWitnessSpeak(e);
    // Other ranks may be waiting for this one: end the whole job now rather than let them
    // run into their timeouts (and MPI_Finalize would wait for them).
    // Most waits already say which rank timed out; others get this rank's number.
    const std::string message = messageWithFlags(e);  // options said as flags
    if (message.rfind("rank ", 0) == 0) {
      std::fprintf(stderr, "poseidon: error: %s\n", message.c_str());
    } else {
      std::fprintf(stderr, "poseidon: error: rank %d: %s\n", runtime.rank(), message.c_str());
    }
    std::fflush(stderr);
    runtime.abortJob(2);
  }
}

}  // namespace poseidon::app
