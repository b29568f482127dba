// Builds a SimModel layer by layer from an architecture, tracking the activation shape, so
// that every layer's parameter shapes and FLOPs follow from the architecture rather than
// from hand-typed totals. Branches (Inception modules, residual blocks) start from a saved
// Shape and join with concat().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simulate/sim_model.h"

namespace poseidon::sim {

struct Shape {
  std::int64_t c = 0, h = 0, w = 0;
};

struct ConvArgs {
  std::int64_t out = 0;
  std::int64_t kh = 1, kw = 1;
  std::int64_t stride = 1;
  std::int64_t ph = 0, pw = 0;
  std::int64_t groups = 1;
  bool bias = true;        // Caffe-era nets; BN nets have none
  bool batchnorm = false;  // BN's scale and shift ride in the conv's layer
};

class NetBuilder {
 public:
  NetBuilder(std::string name, std::int64_t default_batch) {
    model_.name = std::move(name);
    model_.default_batch = default_batch;
  }

  // A conv layer of `a` on `in`; returns the output shape.
  Shape conv(const std::string& name, Shape in, const ConvArgs& a);
  // A square kernel k, padding p, stride s (the common case).
  Shape conv(const std::string& name, Shape in, std::int64_t out, std::int64_t k, std::int64_t s = 1,
             std::int64_t p = 0, bool bn = false);
  // Pooling has no parameters and, as an assumption, no cost: only the shape changes.
  // Caffe rounds the output size up (`ceil`); PyTorch down.
  static Shape pool(Shape in, std::int64_t k, std::int64_t s, std::int64_t p = 0, bool ceil = false);
  static Shape concat(const std::vector<Shape>& branches);
  // An FC layer with `out` outputs on the flattened input; returns {out, 1, 1}.
  Shape fc(const std::string& name, Shape in, std::int64_t out);

  SimModel take() { return std::move(model_); }

 private:
  SimModel model_;
};

}  // namespace poseidon::sim
