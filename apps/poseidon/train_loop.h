// `poseidon train`: the training loop shared by Poseidon and the plain LibTorch baseline.
#pragma once

#include "train_options.h"

namespace poseidon::app {

// Runs training as `options` say; returns the process exit code. Throws poseidon::Error on
// bad input or a failed job (the caller turns it into one line).
int runTrain(const TrainOptions& options, int* argc, char*** argv);

}  // namespace poseidon::app
