#include "simulate/sim_config.h"

#include <cmath>

#include "common/names.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon::sim {

namespace {

constexpr NameTable<System, 4> kSystems{
    {{System::kPoseidon, "poseidon"}, {System::kWfbp, "wfbp"}, {System::kPs, "ps"}, {System::kCoarse, "coarse"}}};
constexpr NameTable<Order, 3> kOrders{
    {{Order::kPriority, "priority"}, {Order::kFifo, "fifo"}, {Order::kDefault, "default"}}};

}  // namespace

System parseSystem(const std::string& name) {
  if (const System* s = valueIn(kSystems, name)) return *s;
  throw OptionError("{system=" + name + "}: use poseidon, wfbp, ps, coarse or all");
}

const char* systemName(System s) { return nameIn(kSystems, s); }

std::vector<System> allSystems() { return {System::kPoseidon, System::kWfbp, System::kPs, System::kCoarse}; }

Order parseOrder(const std::string& name) {
  if (const Order* o = valueIn(kOrders, name)) return *o;
  throw OptionError("{order=" + name + "}: use " + namesIn(kOrders));
}

const char* orderName(Order o) { return nameIn(kOrders, o); }

Order SimConfig::effectiveOrder() const {
  if (order != Order::kDefault) return order;
  // Poseidon's bandwidth manager orders by layer; naive PS and TF send as produced.
  return system == System::kPoseidon || system == System::kWfbp ? Order::kPriority : Order::kFifo;
}

void SimConfig::validate() const {
  const auto rate = [](double v, const char* flag, bool zero_ok) {
    if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0)) {
      throw OptionError(detail::cat("{", flag, "} must be ", zero_ok ? "zero or positive" : "positive", ", got ", v));
    }
  };
  if (nodes < 1 || nodes > 100000) throw OptionError(detail::cat("{nodes} must be from 1 to 100000, got ", nodes));
  if (devices_per_node < 1) {
    throw OptionError(detail::cat("{devices_per_node} must be at least 1, got ", devices_per_node));
  }
  if (batch < 1) throw OptionError(detail::cat("{batch} must be at least 1, got ", batch));
  rate(bandwidth_bytes_per_s, "bandwidth", false);
  rate(latency_s, "latency", true);
  rate(switch_bytes_per_s, "switch_capacity", true);
  rate(device_flops_per_s, "device_rate", true);
  rate(gemm_flops_per_s, "gemm_rate", true);
  rate(reduce_bytes_per_s, "reduce_rate", true);
  rate(host_cores, "host_cores", true);
  rate(stack_bytes_per_s, "stack_rate", true);
  if (nodes_per_host < 1) throw OptionError(detail::cat("{nodes_per_host} must be at least 1, got ", nodes_per_host));
  if (pair_bytes < 4) throw OptionError("{kv_pair_bytes} must hold at least one float");
  checkErrorFeedback(wire, error_feedback);
  for (Scheme s : schemes) {
    if (s != Scheme::kPS && s != Scheme::kSFB) throw InputError("the simulator runs PS and SFB layers only");
  }
  if (iterations < 2 || iterations > 100) {
    throw OptionError(detail::cat("{iterations} must be 2 to 100, got ", iterations));
  }
}

}  // namespace poseidon::sim
