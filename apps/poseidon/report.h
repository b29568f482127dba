// What `poseidon train --json` prints as the last line of rank 0's stdout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "poseidon/options.h"

namespace poseidon::app {

struct LayerReport {
  std::string name;
  std::string kind;
  std::int64_t M = 0, N = 0, params = 0;
  std::string scheme;
  double bytes_sent_per_iter = 0;   // measured over the network, mean per worker (per node with devices)
  double bytes_model_per_iter = 0;  // the cost model's figure (what a node sends)
  std::string reason;               // why the plan chose the scheme
};

struct TrainReport {
  int ranks = 1;
  int workers = 1;
  std::string model;
  // The session's options as run: every one the CLI shows is a key of the report (the
  // option table's words and types), the scheme "local" for the baseline.
  Options options;
  bool baseline = false;
  bool synthetic = false;
  std::string compute = "real";  // or "emulated" (--emulate-compute)
  int threads = 1;
  std::string blas;  // OpenBLAS's kernels ("SkylakeX"), "" with another BLAS
  std::int64_t batch = 0;
  std::int64_t iterations = 0;
  double s_per_iter_median = 0;
  double s_per_iter_mean = 0;  // rates over the whole run (bytes / time) need the mean
  double images_per_s = 0;
  double train_loss = 0;
  std::optional<double> test_accuracy;
  double bytes_sent_per_iter = 0;
  bool bytes_per_node = false;  // bytes_sent_per_iter is per node (devices level), else per worker
  double bytes_model_per_iter = 0;
  std::string param_digest;
  // Straggler dropping, summed over shards: worker updates left out of steps, updates late.
  std::uint64_t dropped_updates = 0;
  std::uint64_t late_updates = 0;
  std::uint64_t max_staleness_seen = 0;  // the most any worker's read lacked
  // The bandwidth manager's queues (its order and budget are options): the messages they sent
  // over the network during the whole run, summed over ranks, with their mean and longest
  // wait in a queue.
  std::uint64_t queued_messages = 0;
  double queue_wait_ms_mean = 0;
  double queue_wait_ms_max = 0;
  std::vector<LayerReport> layers;
};

std::string toJson(const TrainReport& report);

// The median of `values` (the mean of the middle two for an even count), 0 if empty.
double median(std::vector<double> values);
// s_per_iter_median and images_per_s from every iteration's time.
void setThroughput(TrainReport& report, const std::vector<double>& iter_seconds, int workers, std::int64_t batch);

}  // namespace poseidon::app
