// What the simulator needs to know about a network: the coordinator's view of each layer
// (kind, tensors, M x N) plus what its forward and backward cost. Built-in models give
// FLOPs per example, turned into seconds by a device rate; a profile from a real run
// (`poseidon train --profile-out`) gives measured milliseconds at one batch size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/model_info.h"

namespace poseidon::sim {

struct SimLayer {
  LayerInfo info;
  double forward_flops = 0;  // per example, multiply-adds counted as 2
  // Measured seconds at SimModel::profile_batch; used instead of the FLOPs when >= 0.
  double forward_s = -1;
  double backward_s = -1;
};

struct SimModel {
  std::string name;
  std::int64_t default_batch = 32;  // per device, as the paper ran the model
  std::int64_t profile_batch = 0;   // > 0: the layers carry measured times at this batch
  std::vector<SimLayer> layers;     // forward order, layers with parameters only
  // CPU seconds the compute thread used per iteration at profile_batch (a profile's `cpu`
  // line); < 0: not measured, the host CPU bound counts the compute's wall time instead.
  double cpu_per_iteration_s = -1;

  ModelInfo info() const;
  double forwardFlopsPerExample() const;
  std::int64_t params() const { return info().numel(); }
};

struct LayerTimes {
  double forward_s = 0;
  double backward_s = 0;
};

// Backward costs twice the forward: one GEMM for the input gradient and one for the weight
// gradient, each the size of the forward's. Measured times scale linearly with the batch.
constexpr double kBackwardPerForward = 2.0;
std::vector<LayerTimes> layerTimes(const SimModel& model, std::int64_t batch, double device_flops_per_s);

}  // namespace poseidon::sim
