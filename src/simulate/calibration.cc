#include "simulate/calibration.h"

#include "simulate/paper_models.h"

namespace poseidon::sim {

double fittedDeviceRate(const SimModel& model, double images_per_s) {
  return images_per_s * model.forwardFlopsPerExample() * (1.0 + kBackwardPerForward);
}

double calibratedDeviceRate() { return fittedDeviceRate(paperModel(kPaperVgg19.model), kPaperVgg19.images_per_s); }

}  // namespace poseidon::sim
