// The device rate of the built-in models, fitted on one figure of ATC'17: one Titan X runs
// VGG19 at 35.5 images/s at batch 32 (Poseidon = stock Caffe on one node). One rate for
// every model: per-layer FLOPs differ, the device does not. GoogLeNet's own figure (257
// images/s at batch 128) is then a check, not a second fit (docs/SIMULATOR.md).
#pragma once

#include <cstdint>

#include "simulate/sim_model.h"

namespace poseidon::sim {

struct SingleNodeFigure {
  const char* model;
  std::int64_t batch;
  double images_per_s;
};

constexpr SingleNodeFigure kPaperVgg19{"vgg19", 32, 35.5};
constexpr SingleNodeFigure kPaperGoogLeNet{"googlenet", 128, 257.0};

// The FLOP/s at which `model` makes `images_per_s` on one device: an image costs its
// forward FLOPs times (1 + kBackwardPerForward). Batch-independent under that model.
double fittedDeviceRate(const SimModel& model, double images_per_s);
// fittedDeviceRate of VGG19 on kPaperVgg19.
double calibratedDeviceRate();

}  // namespace poseidon::sim
