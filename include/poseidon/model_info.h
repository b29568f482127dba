// Model information as the coordinator sees it: layers, their kinds and parameter shapes.
// The core moves float buffers described by this; it never sees an engine tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace poseidon {

enum class LayerKind { kFC, kConv, kOther };

const char* layerKindName(LayerKind kind);

struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
};

struct LayerInfo {
  std::string name;
  LayerKind kind = LayerKind::kOther;
  std::vector<TensorInfo> tensors;  // e.g. weight, bias
  // For FC layers: the weight is M x N (M outputs, N inputs), the paper's notation.
  std::int64_t M = 0;
  std::int64_t N = 0;
  // FC only: whether the engine adapter can capture the layer's sufficient factors (else
  // it never goes by SFB), and how many factor rows one example makes (its input's
  // leading dimensions past the batch: K = batch * rows_per_example).
  bool factorable = true;
  std::int64_t rows_per_example = 1;
  // A layer whose gradient touches only the rows its input names (an embedding's lookup,
  // one tensor, rows x width): the most distinct rows one worker's batch touched when the
  // adapter looked (its probe), which the cost model weighs sparse rows by; 0 for any other.
  // Data, not model: describe() leaves it out (a resumed run's first batch is another).
  std::int64_t rows_touched = 0;
  std::int64_t numel() const;
};

struct ModelInfo {
  std::string name;
  std::vector<LayerInfo> layers;  // in forward order; syncs run in reverse
  std::int64_t numel() const;
  // Canonical text of the model, the same on ranks that run the same model.
  std::string describe() const;
};

}  // namespace poseidon
