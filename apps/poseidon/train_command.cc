#include "train_command.h"

#include <string>

namespace poseidon::app {

namespace {

// What to train: the model, its data, how much of it.
void addModelOptions(CLI::App* cmd, TrainOptions& o) {
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
  cmd->add_option("--optimizer", o.optimizer,
                  "sgd: SGD with momentum applied on the parameter servers (Poseidon's fast path); adam, adamw: "
                  "torch::optim::Adam/AdamW on every worker, stepping on the allreduced mean gradient as under "
                  "Horovod or DDP (gradient mode; default betas and eps)")
      ->capture_default_str();
  cmd->add_option("--device", o.device,
                  "Where each rank trains: cpu, cuda (the GPU of the rank's local rank among the visible ones; ranks "
                  "may share one) or auto (cuda when PyTorch sees a GPU). Gradients leave the GPU layer by layer "
                  "through pinned host memory; the servers run on the host")
      ->capture_default_str();
  cmd->add_flag("--gradient-mode", o.session.gradient_mode,
                "With --optimizer sgd: no step on the servers; every scheme delivers the workers' mean gradient into "
                ".grad and a local torch::optim::SGD steps (as DDP does), for comparison with server-side SGD");
  cmd->add_option("--lr", o.session.lr,
                  "Learning rate (default: the model's own; SGD: fcnet 0.05, convnet 0.01, mlp 0.05, resnet 0.1, a "
                  "model file may give 'lr X', else 0.01; adam and adamw: resnet 0.005, others 0.001)")
      ->each([&o](const std::string&) { o.lr_given = true; });
  cmd->add_option(
         "--lr-schedule", o.lr_schedule,
         "linear (decay to zero over the run, good for a fixed budget) or constant; applies to every optimizer")
      ->capture_default_str();
  cmd->add_option("--momentum", o.session.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", o.session.weight_decay,
                  "Weight decay: L2 added to the gradient for sgd and adam, decoupled for adamw")
      ->capture_default_str();
  cmd->add_option("--backward-passes", o.session.backward_passes_per_step,
                  "Gradient accumulation (Horovod's backward_passes_per_step, DDP's no_sync): each worker's --batch is "
                  "split into N micro-batches, each gets a forward and backward pass, then one step on their mean "
                  "gradient; the same update as one pass on the whole batch, with 1/N of the activation memory")
      ->capture_default_str();
  cmd->add_option("--buffers", o.session.buffers,
                  "Model buffers (BatchNorm running statistics) during training: broadcast (rank 0's copied to every "
                  "worker before each forward, DDP's default) or average (the workers' mean before each forward)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the initial parameters and of the data order")->capture_default_str();
}

// How each layer is synchronised: the schemes, the cost model, the servers, the KVStore.
void addSchemeOptions(CLI::App* cmd, TrainOptions& o) {
  cmd->add_option("--scheme", o.session.scheme,
                  "Per layer: auto (the cheapest of PS, sufficient factors and allreduce by the cost model), ps (all "
                  "through the parameter server), sfb (every FC layer by sufficient factors), allreduce (MPI_Allreduce "
                  "among the workers, through the KVStore and the dependency engine), factor-push (the 2015 paper's "
                  "comparison after Project Adam: FC factors to the servers, full matrices back)")
      ->capture_default_str();
  cmd->add_option(
         "--cost-model", o.session.cost_model,
         "How auto decides: bytes (the paper's rule: fewest floats moved), time (bytes over the link "
         "bandwidth plus the SFB reconstruction GEMM), or schedule (the SFB/PS plan whose simulated iteration, "
         "with WFBP's overlap, is shortest; needs --profile or --emulate-compute)")
      ->capture_default_str();
  cmd->add_option("--bandwidth", o.bandwidth, "Link rate for --cost-model time, e.g. 1gbit (default: measured)");
  cmd->add_option("--gflops", o.gflops, "GEMM rate in GFLOP/s for --cost-model time (default: measured)");
  cmd->add_option("--verify", o.verify_every,
                  "Every N iterations check that all workers hold identical replicas of the layers each keeps itself "
                  "(SFB, allreduce, PS on a 16-bit wire; fails loudly if not)");
  cmd->add_flag("--no-wfbp", o.no_wfbp, "Sync all layers after the whole backward pass (no wait-free backprop)");
  cmd->add_option("--server-ranks", o.session.server_ranks, "The last N ranks only serve parameters, they do not train")
      ->capture_default_str();
  cmd->add_option("--shards", o.session.shards, "Parameter-server shards, on the last ranks (0: one per rank)")
      ->capture_default_str();
  cmd->add_option("--kvstore", o.session.kvstore,
                  "How allreduce layers order their collectives: funnel (one MPI thread, key order), concurrent "
                  "(keys hashed onto --kvstore-comms communicators) or chained (one at a time in push order)")
      ->capture_default_str();
  cmd->add_option("--kvstore-comms", o.session.kvstore_comms, "concurrent: duplicated MPI communicators")
      ->capture_default_str();
  cmd->add_option("--kvstore-outstanding", o.session.kvstore_outstanding,
                  "concurrent: collectives in flight at most (at least --kvstore-comms)")
      ->capture_default_str();
  cmd->add_option("--fusion-bytes", o.session.fusion_bytes,
                  "Allreduce layers smaller than this share one buffer and one collective (0: no fusion)")
      ->capture_default_str();
}

// The network side: the bandwidth manager, the devices level, waits for slow peers.
void addNetworkOptions(CLI::App* cmd, TrainOptions& o) {
  cmd->add_option("--wire", o.session.wire,
                  "How gradients travel: fp32 (exact), bf16 or fp16 (half the bytes: PS gradients and updates in 16 "
                  "bits, sums and steps in fp32, every replica equal to the servers'; an allreduce's slices summed in "
                  "fp32 by their owners; SFB factors rounded alike for every worker: the same bits on every rank)")
      ->capture_default_str();
  cmd->add_flag("--error-feedback", o.session.error_feedback,
                "With --wire bf16|fp16: add what each rounding lost to the next push and update of the same PS "
                "pair and the next sum of the same allreduce bucket, so it arrives late instead of never (as "
                "PowerSGD and 1-bit SGD); SFB layers' factors then stay fp32");
  cmd->add_option("--send-order", o.session.send_order,
                  "Bandwidth manager: the order of each rank's outgoing messages: priority (lower layers first, "
                  "as the next forward pass needs them) or fifo (in the order they were made)")
      ->capture_default_str();
  cmd->add_option("--max-bandwidth", o.max_bandwidth,
                  "Bandwidth manager: cap each rank's sending rate at its network interface, e.g. 200mbit "
                  "(default: no cap)");
  cmd->add_option("--send-window", o.session.send_window_bytes,
                  "Bandwidth manager: bytes handed to the network at once; the rest waits in priority order "
                  "(0: no window)")
      ->capture_default_str();
  cmd->add_option("--devices-per-node", o.devices_per_node,
                  "The devices level: this many consecutive ranks form a node, whose gradients (or factors) are "
                  "summed (or stacked) inside it before its first rank alone crosses the network; host: the ranks "
                  "of one host ($POSEIDON_NODE, else the host name); 1: flat, every rank on the network")
      ->capture_default_str();
  cmd->add_option("--intra-node", o.intra_node,
                  "With --devices-per-node: how a node's ranks pass gradients and values, memory (one shared "
                  "segment, where they can all map it; else messages) or messages")
      ->capture_default_str();
  cmd->add_option("--kv-pair-bytes", o.session.kv_pair_bytes, "Largest KV pair the parameters are cut into")
      ->capture_default_str();
  cmd->add_option("--timeout", o.timeout_s, "Seconds any wait for a peer may last before the job fails")
      ->capture_default_str();
  cmd->add_option("--staleness", o.session.staleness,
                  "Bounded staleness (SSP) on parameter-server layers: a worker may run this many iterations ahead "
                  "of the slowest (0: BSP)")
      ->capture_default_str();
  cmd->add_option("--straggler-timeout", o.straggler_timeout_s,
                  "Seconds a parameter-server step waits for a late worker before going ahead without its update "
                  "(0: wait for everyone; PS layers only)")
      ->capture_default_str();
}

// The run itself: threads, progress, output, checkpoints, traces, profiles, the baseline.
void addRunOptions(CLI::App* cmd, TrainOptions& o) {
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
  addSchemeOptions(cmd, o);
  addNetworkOptions(cmd, o);
  addRunOptions(cmd, o);
  return cmd;
}

}  // namespace poseidon::app
