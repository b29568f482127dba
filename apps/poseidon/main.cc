// The `poseidon` command line: subcommands, --help, and the one place where errors turn
// into one line on stderr and a non-zero exit.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "allocator.h"
#include "blas_kernels.h"
#include "lab_command.h"
#include "option_flags.h"
#include "plan_command.h"
#include "poseidon/config.h"
#include "poseidon/errors.h"
#include "simulate_command.h"
#include "threads.h"
#include "train_command.h"
#include "train_loop.h"

namespace {

// Under mpirun every rank parses the same flags; only rank 0 reports a usage error.
bool isLeadRank() { return poseidon::app::worldRank() == 0; }

}  // namespace

int main(int argc, char** argv) {
  poseidon::app::selectBlasKernels(argv);
  poseidon::app::tuneAllocator();
  CLI::App app{"Poseidon: data-parallel deep learning over commodity Ethernet (LibTorch + MPI)", "poseidon"};
  app.set_version_flag("--version", std::string(POSEIDON_VERSION));
  app.require_subcommand(1);
  app.footer("Run 'poseidon train --help' for the training flags. Launch distributed jobs with mpirun.");
  poseidon::app::TrainOptions train_options;
  auto* train = poseidon::app::addTrainCommand(app, train_options);
  poseidon::app::PlanOptions plan_options;
  auto* plan = poseidon::app::addPlanCommand(app, plan_options);
  poseidon::app::LabOptions lab_options;
  auto* lab = poseidon::app::addLabCommand(app, lab_options);
  poseidon::app::SimulateOptions simulate_options;
  auto* simulate = poseidon::app::addSimulateCommand(app, simulate_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (!isLeadRank()) return e.get_exit_code();
    return app.exit(e);
  } catch (const poseidon::Error& e) {  // a session option's value, read by the option table's parser
    if (isLeadRank()) std::fprintf(stderr, "poseidon: error: %s\n", poseidon::app::messageWithFlags(e).c_str());
    return 2;
  }

  try {
    if (train->parsed()) return poseidon::app::runTrain(train_options, &argc, &argv);
    if (plan->parsed()) return poseidon::app::runPlan(plan_options);
    if (lab->parsed()) return poseidon::app::runLab(lab_options);
    if (simulate->parsed()) return poseidon::app::runSimulate(simulate_options);
  } catch (const poseidon::Error& e) {
    std::fprintf(stderr, "poseidon: error: %s\n", poseidon::app::messageWithFlags(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "poseidon: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
