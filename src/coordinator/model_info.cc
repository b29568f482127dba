#include "poseidon/model_info.h"

#include <sstream>

#include "common/names.h"

namespace poseidon {

const char* layerKindName(LayerKind kind) {
  static constexpr NameTable<LayerKind, 3> kKinds{
      {{LayerKind::kFC, "fc"}, {LayerKind::kConv, "conv"}, {LayerKind::kOther, "other"}}};
  return nameIn(kKinds, kind);
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t LayerInfo::numel() const {
  std::int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

std::int64_t ModelInfo::numel() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.numel();
  return n;
}

std::string ModelInfo::describe() const {
  std::ostringstream os;
  os << name << ":";
  for (const auto& l : layers) {
    os << " " << l.name << "/" << layerKindName(l.kind) << "[";
    for (std::size_t t = 0; t < l.tensors.size(); ++t) {
      if (t) os << ",";
      for (std::size_t d = 0; d < l.tensors[t].shape.size(); ++d) os << (d ? "x" : "") << l.tensors[t].shape[d];
    }
    os << "]";
    if (l.kind == LayerKind::kFC && (!l.factorable || l.rows_per_example != 1)) {
      os << (l.factorable ? "" : "!sfb") << "x" << l.rows_per_example;
    }
  }
  return os.str();
}

}  // namespace poseidon
