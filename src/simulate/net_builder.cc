#include "simulate/net_builder.h"

#include "poseidon/errors.h"

namespace poseidon::sim {

namespace {

std::int64_t outSize(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, bool ceil) {
  const std::int64_t span = in + 2 * p - k;
  POSEIDON_ENFORCE(span >= 0, "kernel ", k, " larger than input ", in);
  return (ceil ? (span + s - 1) / s : span / s) + 1;
}

}  // namespace

Shape NetBuilder::conv(const std::string& name, Shape in, const ConvArgs& a) {
  POSEIDON_ENFORCE(in.c % a.groups == 0 && a.out % a.groups == 0, name, ": channels not divisible by groups");
  const Shape out{a.out, outSize(in.h, a.kh, a.stride, a.ph, false), outSize(in.w, a.kw, a.stride, a.pw, false)};
  SimLayer l;
  l.info.name = name;
  l.info.kind = LayerKind::kConv;
  const std::int64_t fan_in = in.c / a.groups * a.kh * a.kw;
  l.info.tensors.push_back({"weight", {a.out, in.c / a.groups, a.kh, a.kw}});
  if (a.bias) l.info.tensors.push_back({"bias", {a.out}});
  if (a.batchnorm) {
    l.info.tensors.push_back({"bn.weight", {a.out}});
    l.info.tensors.push_back({"bn.bias", {a.out}});
  }
  l.forward_flops = 2.0 * static_cast<double>(fan_in) * static_cast<double>(a.out * out.h * out.w);
  model_.layers.push_back(std::move(l));
  return out;
}

Shape NetBuilder::conv(const std::string& name, Shape in, std::int64_t out, std::int64_t k, std::int64_t s,
                       std::int64_t p, bool bn) {
  ConvArgs a;
  a.out = out;
  a.kh = a.kw = k;
  a.stride = s;
  a.ph = a.pw = p;
  a.bias = !bn;
  a.batchnorm = bn;
  return conv(name, in, a);
}

Shape NetBuilder::pool(Shape in, std::int64_t k, std::int64_t s, std::int64_t p, bool ceil) {
  return {in.c, outSize(in.h, k, s, p, ceil), outSize(in.w, k, s, p, ceil)};
}

Shape NetBuilder::concat(const std::vector<Shape>& branches) {
  Shape out = branches.at(0);
  out.c = 0;
  for (const auto& b : branches) {
    POSEIDON_ENFORCE(b.h == out.h && b.w == out.w, "concat of branches of different sizes");
    out.c += b.c;
  }
  return out;
}

Shape NetBuilder::fc(const std::string& name, Shape in, std::int64_t out) {
  SimLayer l;
  l.info.name = name;
  l.info.kind = LayerKind::kFC;
  l.info.M = out;
  l.info.N = in.c * in.h * in.w;
  l.info.tensors = {{"weight", {l.info.M, l.info.N}}, {"bias", {l.info.M}}};
  l.forward_flops = 2.0 * static_cast<double>(l.info.M) * static_cast<double>(l.info.N);
  model_.layers.push_back(std::move(l));
  return {out, 1, 1};
}

}  // namespace poseidon::sim
