#include "simulate/sim_model.h"

#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon::sim {

ModelInfo SimModel::info() const {
  ModelInfo m;
  m.name = name;
  for (const auto& l : layers) m.layers.push_back(l.info);
  return m;
}

double SimModel::forwardFlopsPerExample() const {
  double f = 0;
  for (const auto& l : layers) f += l.forward_flops;
  return f;
}

std::vector<LayerTimes> layerTimes(const SimModel& model, std::int64_t batch, double device_flops_per_s) {
  std::vector<LayerTimes> times;
  for (const auto& l : model.layers) {
    LayerTimes t;
    if (l.forward_s >= 0) {
      const double scale = static_cast<double>(batch) / static_cast<double>(model.profile_batch);
      t.forward_s = l.forward_s * scale;
      t.backward_s = l.backward_s * scale;
    } else {
      if (!(device_flops_per_s > 0)) throw OptionError("{device_rate} must be positive");
      t.forward_s = l.forward_flops * static_cast<double>(batch) / device_flops_per_s;
      t.backward_s = kBackwardPerForward * t.forward_s;
    }
    times.push_back(t);
  }
  return times;
}

}  // namespace poseidon::sim
