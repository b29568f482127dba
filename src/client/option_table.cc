// The one table of the session's options (include/poseidon/option_table.h). Each row is an
// option's words: its help, its flag or keyword, the front ends that show it. Its type and
// default are the Options member's; its checks are validate()'s (options.cc).
#include "poseidon/option_table.h"

namespace poseidon {

namespace {

using K = OptionKind;
constexpr unsigned kCli = kCliFront, kPy = kPythonFront, kBoth = kBothFronts, kNone = kNoFront;

// A row; the optional words are set on the returned value (flag, words, ...).
OptionSpec row(const char* name, OptionMember member, K kind, unsigned fronts, const char* group, const char* help) {
  return OptionSpec{name, member, kind, fronts, group, help};
}

OptionSpec withFlag(OptionSpec s, const char* flag) {
  s.flag = flag;
  return s;
}

OptionSpec inPython(OptionSpec s, const char* words) {
  s.python_words = words;
  return s;
}

OptionSpec inCli(OptionSpec s, const char* words) {
  s.cli_words = words;
  return s;
}

OptionSpec serverOnly(OptionSpec s) {
  s.server_only = true;
  return s;
}

constexpr const char* kOptimizer = "Optimizer";
constexpr const char* kSchemes = "Schemes";
constexpr const char* kNetwork = "Network";
constexpr const char* kRun = "Run";

std::vector<OptionSpec> optimizerRows() {
  return {
      inPython(row("lr", &Options::lr, K::kReal, kCli, kOptimizer,
                   "Learning rate (default: the model's own; SGD: fcnet 0.05, convnet 0.01, mlp 0.05, resnet 0.1, a "
                   "model file may give 'lr X', else 0.01; adam and adamw: resnet 0.005, others 0.001)"),
               "the optimizer's lr"),
      inPython(row("momentum", &Options::momentum, K::kReal, kCli, kOptimizer, "SGD momentum"),
               "the optimizer's momentum"),
      inPython(row("weight_decay", &Options::weight_decay, K::kReal, kCli, kOptimizer,
                   "Weight decay: L2 added to the gradient for sgd and adam, decoupled for adamw"),
               "the optimizer's weight_decay"),
      inPython(row("gradient_mode", &Options::gradient_mode, K::kBool, kCli, kOptimizer,
                   "With --optimizer sgd: no step on the servers; every scheme delivers the workers' mean gradient "
                   "into .grad and a local torch::optim::SGD steps (as DDP does), for comparison with server-side SGD"),
               "mode='gradient'"),
      withFlag(row("backward_passes_per_step", &Options::backward_passes_per_step, K::kWhole, kBoth, kOptimizer,
                   "Gradient accumulation (Horovod's backward_passes_per_step, DDP's no_sync): backward passes per "
                   "optimizer step, their gradients summed; divide each pass's loss by it for the mean over the "
                   "whole batch (the CLI splits each worker's --batch into as many micro-batches: the same update "
                   "as one pass, with 1/N of the activation memory)"),
               "--backward-passes"),
      row("buffers", &Options::buffers, K::kText, kBoth, kOptimizer,
          "Model buffers (BatchNorm running statistics) before each training forward: broadcast (rank 0's, as "
          "DDP) or average (the workers' mean)"),
      inCli(serverOnly(row("lr_decay_iterations", &Options::lr_decay_iterations, K::kWhole, kPy, kOptimizer,
                           "Server mode: the servers decay the lr linearly to zero over this many iterations (0: "
                           "a constant lr)")),
            "--lr-schedule"),
      row("batch", &Options::batch, K::kWhole, kNone, kOptimizer, "Examples per worker per iteration"),
  };
}

std::vector<OptionSpec> schemeRows() {
  return {
      row("scheme", &Options::scheme, K::kText, kBoth, kSchemes,
          "Per layer: auto (the cheapest of PS, sufficient factors and allreduce by the cost model; where PS and "
          "allreduce move as many bytes, allreduce, whose buckets fuse small layers, unless {staleness} or "
          "{straggler_timeout} needs PS; an embedding whose batch touches few of its rows, from Python, by sparse "
          "rows: those rows and their indices to every worker), ps (all through the parameter server), sfb (every FC layer by "
          "sufficient factors, the others by PS), allreduce (collectives among the workers through the KVStore "
          "and the dependency engine), factor-push (the CLI's comparison from the 2015 paper, after Project "
          "Adam: FC factors to the servers, full matrices back)"),
      row("cost_model", &Options::cost_model, K::kText, kBoth, kSchemes,
          "How auto decides: bytes (the paper's rule: fewest floats moved), time (bytes over {bandwidth} plus the "
          "SFB reconstruction GEMM at {gemm_flops}), or schedule (the SFB/PS plan whose simulated iteration, "
          "WFBP's overlap included, is shortest; needs measured layer times: {schedule_plan})"),
      row("bandwidth", &Options::bandwidth, K::kRate, kBoth, kSchemes,
          "Link rate for {cost_model=time}, e.g. 1gbit (0: measured at start-up)"),
      row("gemm_flops", &Options::gemm_flops, K::kFlops, kBoth, kSchemes,
          "GEMM rate in flop/s for {cost_model=time}, e.g. 50G (0: measured at start-up)"),
      withFlag(row("wfbp", &Options::wfbp, K::kBool, kBoth, kSchemes,
                   "Wait-free backpropagation, on by default: each layer's sync starts as autograd finishes its "
                   "gradient; {wfbp=false} syncs every layer after the whole backward pass"),
               "--no-wfbp"),
      serverOnly(row("overlap_step", &Options::overlap_step, K::kBool, kPy, kSchemes,
                     "Server mode: off, optimizer.step() returns once every parameter holds its new value, as under "
                     "DDP and Horovod; on keeps the paper's overlap: step() returns while the lower layers' values "
                     "still arrive and the next forward waits for each layer as it reaches it (a read in between "
                     "needs synchronize() first)")),
      row("server_ranks", &Options::server_ranks, K::kWhole, kCli, kSchemes,
          "The last N ranks only serve parameters, they do not train"),
      row("shards", &Options::shards, K::kWhole, kCli, kSchemes,
          "Parameter-server shards, on the last ranks (0: one per rank)"),
      row("kvstore", &Options::kvstore, K::kText, kBoth, kSchemes,
          "How allreduce layers order their collectives: funnel (one MPI thread, key order), concurrent (keys "
          "hashed onto {kvstore_comms} communicators) or chained (one at a time in push order)"),
      row("kvstore_comms", &Options::kvstore_comms, K::kWhole, kBoth, kSchemes,
          "{kvstore=concurrent}: duplicated MPI communicators"),
      row("kvstore_outstanding", &Options::kvstore_outstanding, K::kWhole, kBoth, kSchemes,
          "{kvstore=concurrent}: collectives in flight at most (at least {kvstore_comms})"),
      row("fusion_bytes", &Options::fusion_bytes, K::kWhole, kBoth, kSchemes,
          "Allreduce layers smaller than this share one buffer and one collective (0: no fusion)"),
  };
}

std::vector<OptionSpec> networkRows() {
  OptionSpec node_memory = withFlag(
      row("node_memory", &Options::node_memory, K::kBool, kBoth, kNetwork,
          "With {devices_per_node}: a node's ranks pass gradients and values through one shared memory segment "
          "where they can all map it (else as messages), or always as messages"),
      "--intra-node");
  node_memory.words = "memory/messages";
  return {
      row("wire", &Options::wire, K::kText, kBoth, kNetwork,
          "How gradients travel: fp32 (exact), bf16 or fp16 (half the bytes, as DDP's compression hooks: PS "
          "gradients and each step's update in 16 bits, sums and steps in fp32, every replica equal to the "
          "servers'; an allreduce's slices summed in fp32 by their owners; SFB factors rounded alike for every "
          "worker: the same bits on every rank; in gradient mode the mean gradient comes back in 16 bits, the "
          "same bits on every rank; fp16 with a power-of-two scale per piece, so nothing overflows)"),
      row("error_feedback", &Options::error_feedback, K::kBool, kBoth, kNetwork,
          "With {wire=bf16} or fp16: what each rounding lost is added to the next push and update of the same PS "
          "pair and the next sum of the same allreduce bucket, so it arrives late instead of never (as PowerSGD "
          "and 1-bit SGD); SFB layers' factors then stay fp32; the residuals are checkpointed"),
      row("send_order", &Options::send_order, K::kText, kBoth, kNetwork,
          "Bandwidth manager: the order of each rank's outgoing messages: priority (lower layers first, as the "
          "next forward pass needs them) or fifo (in the order they were made)"),
      row("max_bandwidth", &Options::max_bandwidth, K::kRate, kBoth, kNetwork,
          "Bandwidth manager: cap each rank's sending rate at its network interface, e.g. 200mbit (0: no cap)"),
      withFlag(row("send_window_bytes", &Options::send_window_bytes, K::kWhole, kBoth, kNetwork,
                   "Bandwidth manager: bytes handed to the network at once; the rest waits in priority order (0: "
                   "no window)"),
               "--send-window"),
      row("devices_per_node", &Options::devices_per_node, K::kDevices, kBoth, kNetwork,
          "The devices level: this many consecutive ranks form a node, whose gradients (or factors) are summed "
          "(or stacked) inside it before its first rank alone crosses the network; host: the ranks of one host "
          "($POSEIDON_NODE, else the host name); 1: flat, every rank on the network"),
      node_memory,
      row("kv_pair_bytes", &Options::kv_pair_bytes, K::kWhole, kBoth, kNetwork,
          "Largest KV pair the parameters are cut into"),
      row("timeout", &Options::timeout, K::kSeconds, kBoth, kNetwork,
          "Seconds any wait for a peer may last before the job fails naming what it waited for"),
      serverOnly(row("staleness", &Options::staleness, K::kWhole, kBoth, kNetwork,
                     "Bounded staleness (SSP) on parameter-server layers: a worker may run this many iterations "
                     "ahead of the slowest (0: BSP)")),
      serverOnly(row("straggler_timeout", &Options::straggler_timeout, K::kSeconds, kBoth, kNetwork,
                     "Seconds a parameter-server step waits for a late worker before going ahead without its "
                     "update (0: wait for everyone; PS layers only)")),
  };
}

std::vector<OptionSpec> runRows() {
  return {
      inCli(row("timeline", &Options::timeline, K::kBool, kPy, kRun,
                "Record each layer's forward, backward and waits (write_profile and write_timeline read them)"),
            "--timeline FILE"),
      row("start_iteration", &Options::start_iteration, K::kWhole, kNone, kRun,
          "The first iteration to run: the resumed checkpoint's"),
      row("replicas_equal", &Options::replicas_equal, K::kBool, kNone, kRun,
          "Every rank already holds the same parameters: compare digests instead of broadcasting"),
      row("agreement", &Options::agreement, K::kText, kNone, kRun,
          "What else every rank must agree on (the front end's settings)"),
  };
}

std::vector<OptionSpec> allRows() {
  std::vector<OptionSpec> all;
  for (auto rows : {optimizerRows(), schemeRows(), networkRows(), runRows()}) {
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

}  // namespace

const std::vector<OptionSpec>& optionTable() {
  static const std::vector<OptionSpec> table = allRows();  // constant data, built once
  return table;
}

const OptionSpec* findOption(const std::string& name) {
  for (const OptionSpec& s : optionTable()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

}  // namespace poseidon
