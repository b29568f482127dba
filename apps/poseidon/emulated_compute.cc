#include "emulated_compute.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "checkpoint/state_file.h"
#include "comm/control_channel.h"
#include "common/timeline.h"
#include "coordinator/cost_model.h"
#include "coordinator/scheme_planner.h"
#include "models/model_spec.h"
#include "poseidon/errors.h"
#include "poseidon/runtime.h"
#include "poseidon/session.h"
#include "poseidon/torch.h"
#include "report.h"
#include "session_report.h"
#include "torch/model_builder.h"

namespace poseidon::app {

namespace {

using Seconds = std::chrono::duration<double>;

void waitMs(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

void writeProfile(Session& session, const std::string& path, std::int64_t batch) {
  if (session.rank() != 0) return;
  writeFileAtomically(path, profileText(session.book().model(), session.timeline()->durationsMs(), batch, session.size()));
  std::printf("poseidon: compute profile written to %s\n", path.c_str());
}

int runEmulated(const TrainOptions& o, Runtime& runtime, const ModelSpec& spec, Options session_options,
                std::int64_t total) {
  const ComputeProfile profile = readProfile(o.emulate_compute);
  if (profile.batch != o.batch) {
    throw InputError(detail::cat(o.emulate_compute, " was measured at batch ", profile.batch, "; run with --batch ",
                                 profile.batch));
  }
  torch::manual_seed(o.seed);
  torch::nn::Sequential net = buildSequential(spec);
  const ModelInfo info = describeSequential(net, spec.name);
  std::vector<std::vector<float*>> params;
  std::vector<std::vector<std::vector<float>>> grads(info.layers.size());
  std::vector<std::vector<float*>> grad_ptrs(info.layers.size());
  for (std::size_t l = 0; l < info.layers.size(); ++l) {
    if (!profile.layers.count(info.layers[l].name)) {
      throw InputError(detail::cat(o.emulate_compute, " has no line for layer '", info.layers[l].name, "'"));
    }
  }
  // A profile that names its shapes must be of this model: the same layers, kinds and sizes
  // (not describe(): the run's factor rows were probed, these are not).
  if (!profile.shapes.empty() && profile.shapes.size() != info.layers.size()) {
    throw InputError(detail::cat(o.emulate_compute, " was measured on ", profile.shapes.size(), " layers; model '",
                                 spec.name, "' has ", info.layers.size()));
  }
  for (std::size_t l = 0; l < profile.shapes.size(); ++l) {
    const LayerInfo& mine = info.layers[l];
    const LayerInfo& measured = profile.shapes[l];
    if (measured.name != mine.name || measured.kind != mine.kind || measured.numel() != mine.numel()) {
      throw InputError(detail::cat(o.emulate_compute, " was measured on other layers than model '", spec.name,
                                   "' has (layer ", l, ": '", measured.name, "', ", measured.numel(), " values)"));
    }
  }
  int l = 0;
  for (const auto& m : net->children()) {
    auto ps = m->parameters(true);
    if (ps.empty()) continue;
    std::vector<float*> ptrs;
    for (auto& p : ps) {
      ptrs.push_back(p.data_ptr<float>());
      grads[l].emplace_back(static_cast<std::size_t>(p.numel()), 1e-4f);  // real bytes, harmless values
      grad_ptrs[l].push_back(grads[l].back().data());
    }
    params.push_back(ptrs);
    ++l;
  }
  session_options.lr = 1e-3f;
  Session session(runtime.transport(), info, params, session_options);
  const bool lead = session.rank() == 0;
  // Factors for layers that go by them: K x M and K x N of small values.
  std::vector<std::vector<float>> U(info.layers.size()), V(info.layers.size());
  for (std::size_t k = 0; k < info.layers.size(); ++k) {
    if (session.usesFactors(static_cast<int>(k))) {
      U[k].assign(static_cast<std::size_t>(o.batch * info.layers[k].M), 1e-3f);
      V[k].assign(static_cast<std::size_t>(o.batch * info.layers[k].N), 1e-3f);
    }
  }
  if (lead) {
    std::printf("poseidon: COMPUTE IS EMULATED: every layer's forward and backward is a wait taken from %s; all "
                "communication is real. %s, %d ranks, batch %lld, %lld iterations\n",
                o.emulate_compute.c_str(), spec.name.c_str(), session.size(), static_cast<long long>(o.batch),
                static_cast<long long>(total));
    std::fflush(stdout);
  }
  const int L = static_cast<int>(info.layers.size());
  std::vector<double> times;
  const BytesSent bytes_before = bytesSentSoFar(session);
  if (session.isWorker()) {
    for (std::int64_t it = 0; it < total; ++it) {
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < L; ++k) {
        session.waitLayer(k);
        waitMs(profile.layers.at(info.layers[k].name).first);
      }
      waitMs(profile.other_forward_ms);
      waitMs(profile.other_backward_ms);
      for (int k = L - 1; k >= 0; --k) {
        waitMs(profile.layers.at(info.layers[k].name).second);
        if (session.usesFactors(k)) {
          session.factorsReady(k, U[k].data(), V[k].data(), o.batch);
          session.layerReleased(k);
        } else {
          session.gradientsReady(k, grad_ptrs[k]);
        }
      }
      session.endIteration();
      times.push_back(Seconds(std::chrono::steady_clock::now() - start).count());
      // The syncers zero the gradients after the first iteration: the values change, the
      // bytes on the wire do not, and refilling them would be compute the profile lacks.
    }
    session.waitAll();
  } else {
    session.serveUntil(static_cast<std::uint64_t>(total));
  }
  TrainReport report;
  report.ranks = session.size();
  report.workers = session.workers();
  report.model = spec.name;
  report.scheme = session_options.scheme;
  report.cost_model = session_options.cost_model;
  report.wfbp = session_options.wfbp;
  report.send_order = session_options.send_order;
  report.max_bandwidth = session_options.max_bandwidth;
  report.synthetic = true;
  report.compute = "emulated";
  report.batch = o.batch;
  report.iterations = total;
  setThroughput(report, times, session.workers(), o.batch);
  // Bytes per layer against the cost model, as a computed run reports them (no loss: none was computed).
  gatherSessionFigures(report, session, info, bytes_before, static_cast<double>(total), session.isWorker(), 0.0);
  session.finish();
  if (lead) {
    std::printf("poseidon: done (compute emulated): %lld iterations, %.3f s/iter (median), %.1f images/s, %.1f MB sent "
                "per iteration per worker\n",
                static_cast<long long>(total), report.s_per_iter_median, report.images_per_s,
                report.bytes_sent_per_iter / 1e6);
    if (o.json) std::printf("%s\n", toJson(report).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace poseidon::app
