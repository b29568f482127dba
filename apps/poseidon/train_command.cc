#include "train_command.h"

#include <string>

#include "option_flags.h"

namespace poseidon::app {

namespace {

// What to train: the model, its data, how much of it.
void addModelOptions(CLI::App* cmd, TrainOptions& o) {
  cmd->option_defaults()->group("Model");
  cmd->add_option("--model", o.model,
                  "Built-in model: fcnet, convnet, mlp (Sequential nets) or resnet (residual "
                  "blocks with BatchNorm, a module with its own forward)")
      ->capture_default_str();
  cmd->add_option("--model-file", o.model_file, "Sequential net described in a text file (overrides --model)");
  cmd->add_option("--data", o.data, "Folder with the Fashion-MNIST IDX files (.gz or raw)")->capture_default_str();
  cmd->add_flag("--synthetic", o.synthetic, "Random inputs and labels of the model's shape (for throughput runs)");
  cmd->add_option("--batch", o.batch, "Examples per worker per iteration")->capture_default_str();
  cmd->add_option("--epochs", o.epochs, "Passes over the training set")->capture_default_str();
  cmd->add_option("--iterations", o.iterations, "Run exactly this many iterations (overrides --epochs)");
}

// How each step updates: the optimizer, where it runs, its rates, the buffers, the seed.
void addOptimizerOptions(CLI::App* cmd, TrainOptions& o) {
  const char* group = "Optimizer";
  cmd->add_option("--optimizer", o.optimizer,
                  "sgd: SGD with momentum applied on the parameter servers (Poseidon's fast path); adam, adamw: "
                  "torch::optim::Adam/AdamW on every worker, stepping on the allreduced mean gradient as under "
                  "Horovod or DDP (gradient mode; default betas and eps)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--device", o.device,
                  "Where each rank trains: cpu, cuda (the GPU of the rank's local rank among the visible ones; ranks "
                  "may share one) or auto (cuda when PyTorch sees a GPU). Gradients leave the GPU layer by layer "
                  "through pinned host memory; the servers run on the host")
      ->capture_default_str()
      ->group(group);
  addOptionGroup(cmd, o.session, group);
  // The model's own rate unless given (sessionOptions).
  cmd->get_option("--lr")->default_str("")->each([&o](const std::string&) { o.lr_given = true; });
  cmd->add_option(
         "--lr-schedule", o.lr_schedule,
         "linear (decay to zero over the run, good for a fixed budget) or constant; applies to every optimizer")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--seed", o.seed, "Seed of the initial parameters and of the data order")
      ->capture_default_str()
      ->group(group);
}

// How each layer is synchronised (the schemes, the cost model, the servers, the KVStore),
// and the network side (the wire, the bandwidth manager, the devices level, waits).
void addSchemeAndNetworkOptions(CLI::App* cmd, TrainOptions& o) {
  addOptionGroup(cmd, o.session, "Schemes");
  cmd->add_option("--verify", o.verify_every,
                  "Every N iterations check that all workers hold identical replicas of the layers each keeps itself "
                  "(SFB, allreduce, PS on a 16-bit wire; fails loudly if not)")
      ->group("Schemes");
  addOptionGroup(cmd, o.session, "Network");
}

// The run itself: threads, progress, output, checkpoints, traces, profiles, the baseline.
void addRunOptions(CLI::App* cmd, TrainOptions& o) {
  cmd->option_defaults()->group("Run");
  cmd->add_option("--threads", o.threads, "Compute threads per rank (0: cores / ranks on this host)")
      ->capture_default_str();
  cmd->add_option("--log-every", o.log_every, "Print progress every N iterations (0: about every 5 s)");
  cmd->add_flag("--no-eval", o.no_eval, "Skip the test-set evaluation after each epoch");
  cmd->add_flag("--json", o.json, "Rank 0 prints a JSON summary as its last line of stdout");
  cmd->add_option("--save-params", o.save_params, "Rank 0 writes the final parameters (raw float32) to this new file");
  cmd->add_option("--checkpoint-dir", o.checkpoint_dir,
                  "Save checkpoints (every rank's state, a manifest with checksums) in this folder");
  cmd->add_option("--checkpoint-every", o.checkpoint_every, "Save a checkpoint every N iterations")
      ->capture_default_str();
  cmd->add_option("--resume", o.resume,
                  "Continue exactly from the newest complete checkpoint in this folder (same flags and -np as the "
                  "original run; combine with --checkpoint-dir to keep saving)");
  cmd->add_option("--timeline", o.timeline,
                  "Write a Chrome trace of every rank's forward, backward, send, receive and apply spans and bytes "
                  "per scheme to this new file (open it in ui.perfetto.dev or chrome://tracing)");
  cmd->add_option("--emulate-compute", o.emulate_compute,
                  "Replace every layer's forward and backward by a wait from this profile (communication stays "
                  "real): many ranks on few cores. Needs --iterations");
  cmd->add_option("--profile", o.profile,
                  "Measured layer times of this model (a --profile-out file; times scale linearly to --batch) for "
                  "--cost-model schedule");
  cmd->add_option("--stack-rate", o.stack_rate,
                  "With --cost-model schedule: bytes the host's communication moves per CPU second (e.g. 500MB; "
                  "bench/system/host_cpu.py measures it), to bound each simulated iteration by the host's cores; "
                  "0: not modelled")
      ->capture_default_str();
  cmd->add_option("--profile-out", o.profile_out,
                  "Write this run's per-layer forward/backward times (rank 0, medians) as a profile for "
                  "--emulate-compute");
  cmd->add_flag("--baseline", o.baseline,
                "Plain LibTorch loop in one process with the --optimizer's torch::optim class, for comparison");
}

}  // namespace

CLI::App* addTrainCommand(CLI::App& app, TrainOptions& o) {
  auto* cmd = app.add_subcommand("train", "Train a model data-parallel; run it under mpirun, one process per worker");
  cmd->footer(
      "Examples:\n"
      "  mpirun -np 4 --oversubscribe poseidon train --model fcnet --epochs 1\n"
      "  mpirun -np 2 poseidon train --model-file my.net --iterations 200 --json\n"
      "  mpirun -np 4 --oversubscribe poseidon train --model resnet --optimizer adam --epochs 1\n"
      "  mpirun -np 2 poseidon train --model resnet --device cuda --epochs 1   # each rank on its local GPU\n"
      "  poseidon train --baseline --model fcnet --iterations 20   # plain LibTorch, no Poseidon\n"
      "Model files: one layer per line: input C H W | classes N | conv OUT K [stride=S] [pad=P] |\n"
      "  pool K | relu | flatten | dropout P | fc OUT   (the last layer is 'fc N', N = classes)");
  addModelOptions(cmd, o);
  addOptimizerOptions(cmd, o);
  addSchemeAndNetworkOptions(cmd, o);
  addRunOptions(cmd, o);
  return cmd;
}

}  // namespace poseidon::app
