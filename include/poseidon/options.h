// Options of a Poseidon session, shared by the CLI and library users.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "poseidon/errors.h"

namespace poseidon {

struct ModelInfo;

// Defaults written once: Options and every component's own options start from these.
inline constexpr std::int64_t kDefaultPairBytes = 2 << 20;  // a KV pair, a fusion bucket: 2 MB
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(120);

struct Options {
  // Server-side optimizer: SGD with momentum and weight decay (PyTorch semantics).
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  // Gradient mode: no scheme steps; every one delivers the workers' mean gradient into the
  // engine's gradients and the user's optimizer steps locally (any optimizer). The SGD
  // fields above are then unused.
  bool gradient_mode = false;
  // Gradient accumulation: backward passes per optimizer step (Horovod's
  // backward_passes_per_step). Syncs start on the last; the passes' gradients are summed,
  // as in Horovod and under DDP's no_sync(): divide each pass's loss by the passes for
  // the mean over the concatenated batch.
  int backward_passes_per_step = 1;
  // Buffers (BatchNorm statistics) during training: "broadcast" (rank 0's before every
  // forward, as DDP) or "average" (the workers' mean before every forward).
  std::string buffers = "broadcast";
  // Linear decay of lr to zero over this many iterations (the run's length, usually);
  // 0 keeps it constant.
  std::int64_t lr_decay_iterations = 0;
  // Per-layer scheme: "ps", "sfb" (FC layers by sufficient factors), "allreduce" (MPI
  // collectives among the workers), "auto" (the cheapest per layer; it may also send an
  // embedding's touched rows, Scheme::kRows, which no scheme forces) or "factor-push" (the 2015 paper's strategy after
  // Project Adam: factors to the servers, matrices back); "auto"
  // decides by "bytes" (the paper's rule), "time", or "schedule" (the plan whose simulated
  // iteration, WFBP's overlap included, is shortest; needs schedule_plan below).
  std::string scheme = "auto";
  std::string cost_model = "bytes";
  // The schedule rule's plan: asked on rank 0 (its answer, or its error, goes to every
  // rank) with the model, the batch per worker, the cluster the session found (nodes,
  // devices per node) and the rates (link bytes/s, GEMM flop/s); it gives each layer's
  // scheme in model order, "ps" or "sfb". Only a run's measured layer times can answer:
  // the CLI (`poseidon train --profile FILE`) and Python (DistributedModel(profile=FILE))
  // set it with sim::schedulePlanFrom (src/simulate, not part of the installed package: a
  // C++ user of the installed library writes this callback).
  using SchedulePlan =
      std::function<std::vector<std::string>(const ModelInfo& model, std::int64_t batch, int nodes,
                                             int devices_per_node, double bandwidth, double gemm_flops)>;
  SchedulePlan schedule_plan;
  // Examples per worker per iteration (K in the cost model).
  std::int64_t batch = 32;
  // For the time cost model: link bandwidth (bytes/s per node) and GEMM rate (flop/s);
  // 0 means measure at start-up (rank 0 measures, every rank uses its figures).
  double bandwidth = 0;
  double gemm_flops = 0;
  // Wait-free back-propagation: each layer's sync starts as soon as its gradient exists.
  bool wfbp = true;
  // step() returns once every layer holds its new values, as under DDP and Horovod: a
  // read of a parameter after optimizer.step() sees the trained values. true keeps the
  // paper's overlap instead (server mode): the lower layers' fresh values arrive while the
  // next forward runs, and a read between step() and the next forward needs synchronize()
  // first. The CLI, which reads none there, sets it. With staleness > 0 step() never waits
  // (SSP's reads may be that many iterations old by design).
  bool overlap_step = false;
  // The last `server_ranks` ranks only serve; `shards` = 0 puts a shard on every rank.
  int server_ranks = 0;
  int shards = 0;
  // Allreduce layers: the KVStore design ("funnel", "concurrent" or "chained"), for
  // concurrent its communicators and collectives in flight, and the fusion buffer size
  // (0: one collective per layer).
  std::string kvstore = "concurrent";
  int kvstore_comms = 2;
  int kvstore_outstanding = 2;
  std::int64_t fusion_bytes = kDefaultPairBytes;
  // How the parameter server's layers travel (issue 38): "fp32" (exact, the default),
  // "bf16" or "fp16" (fp16 with a per-pair power-of-two scale). Only the wire is 16 bits:
  // the shards sum and step in fp32. Under BSP the way back is 16 bits too: in server mode
  // each step's update, where the shard keeps old + the rounded update, which is what every
  // worker adds, so every replica stays an exact copy of the servers'; in gradient mode the
  // mean gradient, the same rounding on every rank. SSP and straggler dropping get fp32
  // values back. Allreduce layers go in 16 bits too (each rank's slice rounded, summed in
  // fp32 by the slice's owner, which in server mode steps it and sends its update rounded,
  // as a shard does, and in gradient mode rounds the sum again: the same bits on every
  // rank). SFB
  // layers' factors likewise (every worker reconstructing from the same rounded factors),
  // except with error_feedback, which factors cannot carry: then fp32. The 2015 paper's
  // factor push stays fp32.
  std::string wire = "fp32";
  // With a 16-bit wire: error feedback (as PowerSGD and 1-bit SGD): the part of each push
  // (and each BSP update or mean gradient) that rounding lost is added to the pair's next
  // one, so it arrives late instead of never; on allreduce layers, each rank's rounding of
  // a bucket and each owner's of its slice's update (or sum, in gradient mode) go into the
  // bucket's next call. SFB factors
  // stay fp32 with it. Off by default. The residuals are in checkpoints, and a run resumes
  // only with the setting it was saved with.
  bool error_feedback = false;
  // Largest KV pair; tensors are cut into pairs of at most this size.
  std::int64_t kv_pair_bytes = kDefaultPairBytes;
  // The bandwidth manager: the order of this rank's outgoing messages ("priority": lower
  // layers first, as the next forward pass needs them; "fifo"), its sending budget in
  // bytes/s at the network interface (0: none), and the bytes handed to the network at once
  // (0: no window, every send goes at once and the order hardly matters).
  std::string send_order = "priority";
  double max_bandwidth = 0;
  std::int64_t send_window_bytes = 4 << 20;
  // The 2015 paper's devices level: ranks of one node (a machine, one rank per device)
  // aggregate first and only the node's first rank crosses the network. 1: flat, every
  // rank on its own; D > 1: ranks 0..D-1 are node 0, D..2D-1 node 1, ...; 0: ranks on the
  // same host ($POSEIDON_NODE, else the host name) form a node.
  int devices_per_node = 1;
  // Inside a node, gradients and values pass through one shared memory segment where the
  // node's ranks can all map it (false: as messages, for comparison).
  bool node_memory = true;
  // Every blocking wait ends with a TimeoutError after this long.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Bounded staleness (SSP) on the parameter server: a worker may run up to this many
  // iterations ahead of the slowest; a read at iteration t has every update of iterations
  // up to t - staleness - 1. 0 is BSP.
  int staleness = 0;
  // Straggler dropping on the parameter server: a step goes ahead without the workers
  // whose update is this late (0: off, BSP waits for everyone).
  std::chrono::milliseconds straggler_timeout{0};
  // Record a timeline of every layer's work (Session::timeline()).
  bool timeline = false;
  // The first iteration to run: that of the checkpoint a run resumes from (0: a new run).
  std::uint64_t start_iteration = 0;
  // Every rank already holds the same parameters and frozen tensors (the next session of a
  // running job: mode "auto" moving onto the servers): the start compares their digests
  // instead of broadcasting rank 0's, and fails if they differ.
  bool replicas_equal = false;
  // Anything else every rank must agree on (the CLI puts its flags here); compared at
  // start-up together with the model and the information book.
  std::string agreement;
};

// A bad option. The message names options as "{field}" or "{field=value}", field being the
// Options member ("{lr=0}", "{staleness}"), so that each front end can say them in its own
// words: what() writes "lr=0" (a C++ user's words), in() what a front end's `say` writes
// (the CLI's "--lr 0", Python's "lr=0").
class OptionError : public InputError {
 public:
  explicit OptionError(const std::string& text);
  // The message, each option said by say(field, value); value is "" for "{field}".
  std::string in(const std::function<std::string(const std::string& field, const std::string& value)>& say) const;
  // The option the error is about (the message's first), e.g. "lr".
  std::string field() const;

 private:
  std::string text_;
};

// `text` with each "{field}" or "{field=value}" said by `say`: OptionError's rendering, and
// the option table's help in each front's words (option_table.h).
std::string sayOptions(const std::string& text,
                       const std::function<std::string(const std::string& field, const std::string& value)>& say);

// Every check of the options that needs no model and no other rank (the session runs it
// first; front ends may run it earlier to fail before loading data). Throws OptionError.
void validate(const Options& options);

// Options::devices_per_node from its text, as every front end takes it: "host" (0: ranks
// on one host form a node) or a whole number of ranks per node, at least 1 (1: flat).
// Throws OptionError.
int parseDevicesPerNode(const std::string& text);

// The checkpoint options as every front end takes them: a save every `every` iterations
// (0: never, or only when the front end's user asks) into the folder `dir`. Throws
// OptionError ({checkpoint_every}, {checkpoint_dir}).
void checkCheckpointOptions(const std::string& dir, std::int64_t every);

// The run-configuration string: one line of fields from the options, the one description
// of a run's settings. kStart: what every rank must share at start-up (with the model;
// Options::agreement included). kResume: what a run resumed from a checkpoint must share
// with the run that saved it (options.cc lists which fields and why).
enum class ConfigurationUse { kStart, kResume };
std::string runConfiguration(const Options& options, ConfigurationUse use);
// The first word of every run-configuration string (a checkpoint written before this
// format has none).
inline constexpr const char* kConfigurationFormat = "config/2";
// runConfiguration's field for a run whose allreduce layers may step by owner (server mode,
// any wire): their momentum is then current only on each rank's own slices, so such a
// checkpoint resumes only a run that steps by owner too. A checkpoint without it (every
// rank's momentum whole: an earlier build, whose 16-bit wires stepped every layer on every
// rank) resumes either. Gradient mode, the one run without it, is refused by its own field
// (gradient_mode) as well: the field chooses the message.
inline constexpr const char* kShardedAllreduceField = " allreduce_momentum=sharded";

}  // namespace poseidon
