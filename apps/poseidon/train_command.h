// The flags of `poseidon train` (CLI11).
#pragma once

#include <CLI/CLI.hpp>

#include "train_options.h"

namespace poseidon::app {

CLI::App* addTrainCommand(CLI::App& app, TrainOptions& options);

}  // namespace poseidon::app
