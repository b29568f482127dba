// Options of a Poseidon session, shared by the CLI and library users.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace poseidon {

struct Options {
  // Server-side optimizer: SGD with momentum and weight decay (PyTorch semantics).
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  // Wait-free back-propagation: each layer's sync starts as soon as its gradient exists.
  bool wfbp = true;
  // The last `server_ranks` ranks only serve; `shards` = 0 puts a shard on every rank.
  int server_ranks = 0;
  int shards = 0;
  // Largest KV pair; tensors are cut into pairs of at most this size.
  std::int64_t kv_pair_bytes = 2 << 20;
  // Every blocking wait ends with a TimeoutError after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // Anything else every rank must agree on (the CLI puts its flags here); compared at
  // start-up together with the model and the information book.
  std::string agreement;
};

}  // namespace poseidon
