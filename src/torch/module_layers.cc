#include "torch/module_layers.h"

#include <unordered_set>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

LayerKind kindOf(torch::nn::Module& m) {
  if (m.as<torch::nn::Linear>()) return LayerKind::kFC;
  if (m.as<torch::nn::Conv1d>() || m.as<torch::nn::Conv2d>() || m.as<torch::nn::Conv3d>()) return LayerKind::kConv;
  return LayerKind::kOther;
}

// Today's names for a Sequential's children (checkpoints and reports use them): fc9, conv0.
std::string sequentialName(torch::nn::Module& child, std::size_t position, const std::string& below) {
  if (!below.empty()) return detail::cat(position, ".", below);
  switch (kindOf(child)) {
    case LayerKind::kFC:
      return detail::cat("fc", position);
    case LayerKind::kConv:
      return detail::cat("conv", position);
    case LayerKind::kOther:
      return detail::cat(child.name(), position);
  }
  return "";
}

// The module's own trainable parameters as a layer, or nothing. A tensor already in an
// earlier layer (tied weights) stays there: one tensor, one sync.
bool makeLayer(torch::nn::Module& m, const std::string& path, ModuleLayer& layer, LayerInfo& info,
               std::unordered_set<const void*>& seen) {
  for (const auto& p : m.named_parameters(/*recurse=*/false)) {
    if (!p.value().requires_grad() || !seen.insert(p.value().unsafeGetTensorImpl()).second) continue;
    const auto& t = p.value();
    if (t.scalar_type() != torch::kFloat || !t.is_contiguous()) {
      throw InputError(detail::cat("parameter '", path.empty() ? "" : path + ".", p.key(), "' is ", t.scalar_type(),
                                   ": Poseidon trains contiguous float32 parameters (keep the model in float32 and "
                                   "use torch::autocast for lower precision)"));
    }
    layer.params.push_back(t);
    info.tensors.push_back(TensorInfo{p.key(), t.sizes().vec()});
  }
  if (layer.params.empty()) return false;
  layer.module = &m;
  layer.path = path;
  info.kind = kindOf(m);
  if (info.kind == LayerKind::kFC) {
    auto* fc = m.as<torch::nn::Linear>();
    // SFB rebuilds weight (M x N) and bias (M); a Linear that trains anything else is OTHER.
    layer.linear = info.tensors[0].name == "weight" &&
                   (info.tensors.size() == 1 || (info.tensors.size() == 2 && info.tensors[1].name == "bias"));
    if (layer.linear) {
      info.M = fc->options.out_features();
      info.N = fc->options.in_features();
    } else {
      info.kind = LayerKind::kOther;
    }
  }
  return true;
}

}  // namespace

ModuleLayers discoverLayers(torch::nn::Module& root, const std::string& name, bool sequential_root) {
  ModuleLayers out;
  out.info.name = name;
  std::unordered_set<const void*> seen_tensors;
  std::unordered_set<const torch::nn::Module*> seen_modules;  // a module registered twice is one layer
  auto add = [&](torch::nn::Module& m, const std::string& path, const std::string& layer_name, bool factorable) {
    if (!seen_modules.insert(&m).second) return;
    ModuleLayer layer;
    LayerInfo info;
    if (!makeLayer(m, path, layer, info, seen_tensors)) return;
    info.name = layer_name;
    info.factorable = info.kind == LayerKind::kFC && factorable;
    out.layer_of_module[&m] = static_cast<int>(out.layers.size());
    out.layers.push_back(std::move(layer));
    out.info.layers.push_back(std::move(info));
  };
  if (sequential_root) {
    add(root, "", "root", false);
    std::size_t position = 0;
    for (const auto& child : root.named_children()) {
      std::vector<int> mine;
      for (const auto& sub : child.value()->named_modules()) {
        const std::size_t before = out.layers.size();
        const std::string path = sub.key().empty() ? child.key() : child.key() + "." + sub.key();
        add(*sub.value(), path, sequentialName(*child.value(), position, sub.key()), sub.key().empty());
        if (out.layers.size() > before) mine.push_back(static_cast<int>(before));
      }
      out.layers_of_child.push_back(std::move(mine));
      ++position;
    }
  } else {
    for (const auto& m : root.named_modules()) add(*m.value(), m.key(), m.key().empty() ? "root" : m.key(), false);
  }
  // Subtrees, by path prefix.
  for (const auto& m : root.named_modules()) {
    auto& under = out.layers_under[m.value().get()];
    const std::string prefix = m.key().empty() ? "" : m.key() + ".";
    for (std::size_t l = 0; l < out.layers.size(); ++l) {
      const std::string& p = out.layers[l].path;
      if (m.key().empty() || p == m.key() || p.compare(0, prefix.size(), prefix) == 0)
        under.push_back(static_cast<int>(l));
    }
  }
  return out;
}

}  // namespace poseidon
