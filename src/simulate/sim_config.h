// What one simulation runs: the system, the cluster and its network, and the rates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/cost_model.h"
#include "coordinator/scheme_planner.h"
#include "poseidon/options.h"

namespace poseidon::sim {

// The systems of ATC'17's comparison:
//  poseidon: WFBP + HybComm (PS or SFB per layer, as BestScheme picks);
//  wfbp:     WFBP, every layer through the PS;
//  ps:       naive PS: every sync starts after the whole backward and the next forward
//            waits for all of them;
//  coarse:   TensorFlow-like: each tensor whole on one server, round-robin over the
//            nodes, no KV-pair slicing (overlap as WFBP, messages first come first served).
enum class System { kPoseidon, kWfbp, kPs, kCoarse };
// Which queued message a NIC sends next: the lowest layer first (the bandwidth manager,
// what the next forward needs first) or first come first served.
enum class Order { kPriority, kFifo, kDefault };

System parseSystem(const std::string& name);  // throws InputError
const char* systemName(System s);
std::vector<System> allSystems();
Order parseOrder(const std::string& name);
const char* orderName(Order o);

struct SimConfig {
  System system = System::kPoseidon;
  Order order = Order::kDefault;  // kDefault: priority for poseidon and wfbp, FIFO else
  int nodes = 1;
  int devices_per_node = 1;
  std::int64_t batch = 32;  // per device
  // Network: each node one full-duplex NIC into one switch.
  double bandwidth_bytes_per_s = 5e9;  // each direction
  double latency_s = 0;                // one way, per message
  double switch_bytes_per_s = 0;       // all traffic through the switch; 0: non-blocking
  // Rates. A rate of 0 makes that cost free (not modelled).
  double device_flops_per_s = 0;  // forward/backward of built-in models
  double gemm_flops_per_s = 0;    // SFB reconstruction; 0: the device rate
  // Where the reconstruction GEMM runs: on the device, between two layers of compute (a GPU
  // kernel, or the CPU cores the compute uses), or on a resource of its own (overlapping).
  bool reconstruct_on_device = true;
  // Poseidon's BestScheme: the paper's bytes rule, the planner's time rule (bytes over the
  // link rate plus the reconstruction GEMM over gemmRate()), or the schedule rule (the
  // combination this simulation runs fastest, sim::chooseBySchedule).
  CostRule rule = CostRule::kBytes;
  // Poseidon's scheme per layer, fixed (PS or SFB); empty: the rule above decides.
  std::vector<Scheme> schemes;
  double reduce_bytes_per_s = 0;  // a server summing / stepping a contribution, a leader
                                  // summing its devices' gradients
  // The host CPU, a bound on the iteration (as the link rate is): the nodes of one host
  // share `host_cores` cores between their devices' compute threads, SFB's reconstruction
  // (the devices are the host's cores here) and communication
  // (network stack, MPI, copy and server threads), which spends one CPU second per
  // `stack_bytes_per_s` bytes of a node's traffic (the mean of what it sends and receives:
  // the sender's and the receiver's work together).
  // 0 cores: not modelled (each node has CPU to spare).
  double host_cores = 0;
  int nodes_per_host = 1;
  double stack_bytes_per_s = 0;                 // 0: the stack costs no CPU
  std::int64_t pair_bytes = kDefaultPairBytes;  // the information book's largest KV pair
  // How PS pushes and fresh values, and SFB factors between nodes, travel (issue 38:
  // bf16/fp16 halve their bytes; servers still sum and step fp32; a node's devices hand
  // their factors to the leader in fp32).
  WireFormat wire = WireFormat::kFp32;
  // Error feedback on a 16-bit wire: SFB factors travel fp32 (factorWireOf), the rest as `wire`.
  bool error_feedback = false;
  int iterations = 3;                           // simulated; the first warms up, the rest are measured

  Order effectiveOrder() const;
  WireFormat factorWire() const { return factorWireOf(wire, error_feedback); }
  double gemmRate() const { return gemm_flops_per_s > 0 ? gemm_flops_per_s : device_flops_per_s; }
  // Throws InputError naming the flag when a number is out of range.
  void validate() const;
};

}  // namespace poseidon::sim
