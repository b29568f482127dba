#include "emulated_compute.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "checkpoint/state_file.h"
#include "coordinator/cost_model.h"
#include "coordinator/scheme_planner.h"
#include "models/model_spec.h"
#include "poseidon/errors.h"
#include "poseidon/runtime.h"
#include "poseidon/session.h"
#include "poseidon/timeline.h"
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
  if (session.layout().rank != 0) return;
  writeFileAtomically(path, profileText(session.model(), session.timeline()->durationsMs(), batch, session.layout().size));
  std::printf("poseidon: compute profile written to %s\n", path.c_str());
}

namespace {

// The profile must name every layer of the model, and if it names its shapes, be of this
// model: the same layers, kinds and sizes (not describe(): the run's factor rows were
// probed, these are not).
void checkProfileFits(const ComputeProfile& profile, const TrainOptions& o, const ModelSpec& spec,
                      const ModelInfo& info) {
  if (profile.batch != o.batch) {
    throw InputError(
        detail::cat(o.emulate_compute, " was measured at batch ", profile.batch, "; run with --batch ", profile.batch));
  }
  for (const auto& layer : info.layers) {
    if (!profile.layers.count(layer.name)) {
      throw InputError(detail::cat(o.emulate_compute, " has no line for layer '", layer.name, "'"));
    }
  }
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
}

// What the emulated iterations hand to the session: the net's parameters, and gradients
// and factors of harmless values (real bytes; after the first iteration the syncers have
// zeroed the gradients, and refilling them would be compute the profile lacks).
struct EmulatedBuffers {
  torch::nn::Sequential net;  // owns the parameters `params` points into
  std::vector<std::vector<float*>> params;
  std::vector<std::vector<std::vector<float>>> grads;
  std::vector<std::vector<float*>> grad_ptrs;
  std::vector<std::vector<float>> U, V;  // by layer, for layers that go by factors

  EmulatedBuffers(torch::nn::Sequential& net, std::size_t layers)
      : net(net), grads(layers), grad_ptrs(layers), U(layers), V(layers) {
    int l = 0;
    for (const auto& m : net->children()) {
      auto ps = m->parameters(true);
      if (ps.empty()) continue;
      std::vector<float*> ptrs;
      for (auto& p : ps) {
        ptrs.push_back(p.data_ptr<float>());
        grads[l].emplace_back(static_cast<std::size_t>(p.numel()), 1e-4f);
        grad_ptrs[l].push_back(grads[l].back().data());
      }
      params.push_back(ptrs);
      ++l;
    }
  }

  // Factors K x M and K x N of small values for the layers the session sends by them.
  void makeFactors(const Session& session, const ModelInfo& info, std::int64_t batch) {
    for (std::size_t k = 0; k < info.layers.size(); ++k) {
      if (!usesFactors(session.plan()[static_cast<int>(k)].scheme)) continue;
      U[k].assign(static_cast<std::size_t>(batch * info.layers[k].M), 1e-3f);
      V[k].assign(static_cast<std::size_t>(batch * info.layers[k].N), 1e-3f);
    }
  }
};

// One iteration: each layer's forward a wait after its sync's, then backward top down,
// each layer's wait followed by its gradient (or factors).
void emulateIteration(Session& session, const ModelInfo& info, const ComputeProfile& profile,
                      const std::shared_ptr<EmulatedBuffers>& buffers, std::int64_t batch) {
  EmulatedBuffers& b = *buffers;
  const int L = static_cast<int>(info.layers.size());
  for (int k = 0; k < L; ++k) {
    session.waitLayer(k);
    waitMs(profile.layers.at(info.layers[k].name).first);
  }
  waitMs(profile.other_forward_ms);
  waitMs(profile.other_backward_ms);
  for (int k = L - 1; k >= 0; --k) {
    waitMs(profile.layers.at(info.layers[k].name).second);
    if (usesFactors(session.plan()[k].scheme)) {
      session.factorsReady(k, b.U[k].data(), b.V[k].data(), batch);
      session.layerReleased(k);
    } else {
      session.gradientsReady(k, b.grad_ptrs[k], buffers);
    }
  }
  session.endIteration();
}

TrainReport emulatedReport(const TrainOptions& o, const ModelSpec& spec, const Options& session_options,
                           const Session& session, std::int64_t total) {
  TrainReport report;
  report.ranks = session.layout().size;
  report.workers = session.layout().workers;
  report.model = spec.name;
  report.options = session_options;
  report.synthetic = true;
  report.compute = "emulated";
  report.batch = o.batch;
  report.iterations = total;
  return report;
}

}  // namespace

int runEmulated(const TrainOptions& o, Runtime& runtime, const ModelSpec& spec, Options session_options,
                std::int64_t total) {
  const ComputeProfile profile = readProfile(o.emulate_compute);
  torch::manual_seed(o.seed);
  torch::nn::Sequential net = buildSequential(spec);
  const ModelInfo info = describeSequential(net, spec.name);
  checkProfileFits(profile, o, spec, info);
  // Shared with the session's sends, which read the gradients and parameters in place.
  auto buffers = std::make_shared<EmulatedBuffers>(net, info.layers.size());
  session_options.lr = 1e-3f;
  Session session(runtime.transport(), info, buffers->params, session_options, buffers);
  buffers->makeFactors(session, info, o.batch);
  const bool lead = session.layout().rank == 0;
  if (lead) {
    std::printf(
        "poseidon: COMPUTE IS EMULATED: every layer's forward and backward is a wait taken from %s; all "
        "communication is real. %s, %d ranks, batch %lld, %lld iterations\n",
        o.emulate_compute.c_str(), spec.name.c_str(), session.layout().size, static_cast<long long>(o.batch),
        static_cast<long long>(total));
    std::fflush(stdout);
  }
  std::vector<double> times;
  const BytesSent bytes_before = bytesSentSoFar(session);
  if (session.layout().worker) {
    for (std::int64_t it = 0; it < total; ++it) {
      const auto start = std::chrono::steady_clock::now();
      emulateIteration(session, info, profile, buffers, o.batch);
      times.push_back(Seconds(std::chrono::steady_clock::now() - start).count());
    }
    session.waitAll();
  } else {
    session.serveUntil(static_cast<std::uint64_t>(total));
  }
  TrainReport report = emulatedReport(o, spec, session_options, session, total);
  setThroughput(report, times, session.layout().workers, o.batch);
  // Bytes per layer against the cost model, as a computed run reports them (no loss: none was computed).
  gatherSessionFigures(report, session, info, bytes_before, static_cast<double>(total), session.layout().worker, 0.0);
  session.finish();
  if (lead) {
    std::printf(
        "poseidon: done (compute emulated): %lld iterations, %.3f s/iter (median), %.1f images/s, %.1f MB sent "
        "per iteration per worker\n",
        static_cast<long long>(total), report.s_per_iter_median, report.images_per_s, report.bytes_sent_per_iter / 1e6);
    if (o.json) std::printf("%s\n", toJson(report).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace poseidon::app
