#include "toy_training.h"

#include <cmath>

#include "comm/gradient16.h"
#include "poseidon/session.h"
#include "update/sgd.h"

namespace poseidon {
namespace toy {

ModelInfo model() {
  ModelInfo m;
  m.name = "toy";
  m.layers.push_back(LayerInfo{"conv0", LayerKind::kConv, {{"weight", {8, 3, 3, 3}}, {"bias", {8}}}, 0, 0});
  m.layers.push_back(LayerInfo{"fc1", LayerKind::kFC, {{"weight", {40, 50}}, {"bias", {40}}}, 40, 50});
  m.layers.push_back(LayerInfo{"fc2", LayerKind::kFC, {{"weight", {3, 40}}, {"bias", {3}}}, 3, 40});
  return m;
}

float initial(std::size_t flat) { return std::sin(0.37f * static_cast<float>(flat)); }
float target(int worker, std::size_t flat) { return 0.1f * worker + std::cos(0.11f * static_cast<float>(flat)); }

std::vector<std::vector<float*>> Replica::pointers() {
  std::vector<std::vector<float*>> p(params.size());
  for (std::size_t l = 0; l < params.size(); ++l) {
    for (auto& v : params[l]) p[l].push_back(v.data());
  }
  return p;
}

Replica makeReplica(const ModelInfo& m, int rank) {
  Replica r;
  r.params.resize(m.layers.size());
  r.grads.resize(m.layers.size());
  r.base.resize(m.layers.size());
  std::size_t flat = 0;
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    for (const auto& t : m.layers[l].tensors) {
      r.base[l].push_back(flat);
      std::vector<float> v(t.numel());
      for (auto& x : v) x = rank == 0 ? initial(flat) : 1e6f, ++flat;
      r.params[l].push_back(v);
      r.grads[l].push_back(std::vector<float>(v.size()));
    }
  }
  return r;
}

void roundWithFeedback(WireFormat wire, bool feedback, std::vector<float>& x, std::vector<float>& residual) {
  if (feedback) {
    for (std::size_t i = 0; i < x.size(); ++i) residual[i] += x[i];
    x = residual;
  }
  roundThrough(wire, x.data(), x.data(), x.size());
  if (feedback) {
    for (std::size_t i = 0; i < x.size(); ++i) residual[i] -= x[i];
  }
}


std::vector<std::vector<std::vector<float>>> reference(const ModelInfo& m, int workers, const Options& o,
                                                       int iterations) {
  Replica r = makeReplica(m, 0);
  std::vector<std::vector<std::vector<float>>> momentum = r.grads;
  // Error feedback: each worker's push residual and each step's update residual, by tensor.
  std::vector<std::vector<std::vector<std::vector<float>>>> pushed(workers, r.grads);
  std::vector<std::vector<std::vector<float>>> updated = r.grads;
  const WireFormat wire = parseWireFormat(o.wire);
  for (int it = 0; it < iterations; ++it) {
    for (std::size_t l = 0; l < m.layers.size(); ++l) {
      for (std::size_t t = 0; t < r.params[l].size(); ++t) {
        auto& v = r.params[l][t];
        std::vector<std::vector<float>> g(workers, std::vector<float>(v.size()));
        std::vector<const float*> ptrs;
        for (int w = 0; w < workers; ++w) {
          for (std::size_t i = 0; i < v.size(); ++i) g[w][i] = v[i] - target(w, r.base[l][t] + i);
          roundWithFeedback(wire, o.error_feedback, g[w], pushed[w][l][t]);
          ptrs.push_back(g[w].data());
        }
        const std::vector<float> before = v;
        sgdStep(v.data(), momentum[l][t].data(), ptrs, 1.0f / workers, static_cast<std::int64_t>(v.size()),
                SgdOptions{o.lr, o.momentum, o.weight_decay}, it == 0);
        if (o.wire == "fp32") continue;
        // A 16-bit wire's update comes back rounded: old + the rounded update.
        for (std::size_t i = 0; i < v.size(); ++i) v[i] -= before[i];
        roundWithFeedback(wire, o.error_feedback, v, updated[l][t]);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] += before[i];
      }
    }
  }
  return r.params;
}

void train(Session& session, Replica& r, int worker, int iterations) {
  const int layers = static_cast<int>(r.params.size());
  for (int it = 0; it < iterations; ++it) {
    for (int l = layers - 1; l >= 0; --l) {
      session.waitLayer(l);  // the forward pass would have waited here
      std::vector<float*> g;
      for (std::size_t t = 0; t < r.params[l].size(); ++t) {
        for (std::size_t i = 0; i < r.params[l][t].size(); ++i) {
          r.grads[l][t][i] = r.params[l][t][i] - target(worker, r.base[l][t] + i);
        }
        g.push_back(r.grads[l][t].data());
      }
      session.gradientsReady(l, g);
    }
    session.endIteration();
  }
}

}  // namespace toy
}  // namespace poseidon
