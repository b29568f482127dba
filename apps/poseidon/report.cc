#include "report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

#include "poseidon/option_table.h"

namespace poseidon::app {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void setThroughput(TrainReport& r, const std::vector<double>& iter_seconds, int workers, std::int64_t batch) {
  r.s_per_iter_median = median(iter_seconds);
  r.s_per_iter_mean =
      iter_seconds.empty() ? 0 : std::accumulate(iter_seconds.begin(), iter_seconds.end(), 0.0) / iter_seconds.size();
  r.images_per_s = r.s_per_iter_median > 0 ? workers * batch / r.s_per_iter_median : 0;
}

namespace {

// An option's value as JSON of its type (a duration in seconds).
nlohmann::ordered_json optionJson(const OptionSpec& spec, const Options& options) {
  return std::visit(
      [&](auto member) -> nlohmann::ordered_json {
        const auto& v = options.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          return v.count() / 1000.0;
        } else if constexpr (std::is_same_v<T, float>) {
          return std::stod(optionText(spec, options));  // 0.9, not the float's 0.8999999761581421
        } else {
          return v;
        }
      },
      spec.member);
}

}  // namespace

std::string toJson(const TrainReport& r) {
  nlohmann::ordered_json j;
  j["ranks"] = r.ranks;
  j["workers"] = r.workers;
  j["model"] = r.model;
  for (const OptionSpec& spec : optionTable()) {
    if (spec.fronts & kCliFront) j[spec.name] = optionJson(spec, r.options);
  }
  if (r.baseline) j["scheme"] = "local";
  j["baseline"] = r.baseline;
  j["synthetic"] = r.synthetic;
  j["compute"] = r.compute;
  j["threads"] = r.threads;
  j["blas"] = r.blas;
  j["batch"] = r.batch;
  j["iterations"] = r.iterations;
  j["s_per_iter_median"] = r.s_per_iter_median;
  j["s_per_iter_mean"] = r.s_per_iter_mean;
  j["images_per_s"] = r.images_per_s;
  j["train_loss"] = r.train_loss;
  j["test_accuracy"] = r.test_accuracy ? nlohmann::ordered_json(*r.test_accuracy) : nlohmann::ordered_json(nullptr);
  j["bytes_sent_per_iter"] = r.bytes_sent_per_iter;
  j["bytes_model_per_iter"] = r.bytes_model_per_iter;
  j["param_digest"] = r.param_digest;
  j["straggler_dropped_updates"] = r.dropped_updates;
  j["straggler_late_updates"] = r.late_updates;
  j["max_staleness_seen"] = r.max_staleness_seen;
  nlohmann::ordered_json queue;
  queue["messages"] = r.queued_messages;
  queue["wait_ms_mean"] = r.queue_wait_ms_mean;
  queue["wait_ms_max"] = r.queue_wait_ms_max;
  j["send_queue"] = queue;
  auto layers = nlohmann::ordered_json::array();
  for (const auto& l : r.layers) {
    nlohmann::ordered_json o;
    o["name"] = l.name;
    o["kind"] = l.kind;
    o["M"] = l.M;
    o["N"] = l.N;
    o["params"] = l.params;
    o["scheme"] = l.scheme;
    o["bytes_sent_per_iter"] = l.bytes_sent_per_iter;
    o["bytes_model_per_iter"] = l.bytes_model_per_iter;
    o["reason"] = l.reason;
    layers.push_back(o);
  }
  j["layers"] = layers;
  return j.dump();
}

}  // namespace poseidon::app
