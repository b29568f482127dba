#include "torch/buffers.h"

#include <cstring>

#include "common/digest.h"
#include "poseidon/collectives.h"
#include "poseidon/errors.h"

namespace poseidon {

std::vector<NamedTensor> namedBuffers(torch::nn::Module& root) {
  std::vector<NamedTensor> out;
  for (const auto& b : root.named_buffers(/*recurse=*/true)) out.push_back(NamedTensor{b.key(), b.value()});
  return out;
}

ModelBuffers::ModelBuffers(std::vector<NamedTensor> buffers) {
  for (auto& b : buffers) {
    const auto& t = b.tensor;
    if (!t.defined() || t.numel() == 0) continue;
    if (!t.is_contiguous()) throw InputError("buffer '" + b.name + "': Poseidon keeps contiguous buffers only");
    host_.push_back(t.device().is_cpu() ? t : torch::empty_like(t, torch::TensorOptions().device(torch::kCPU)));
    buffers_.push_back(std::move(b));
  }
}

// Float32 buffers travel as one vector, the others (counters) as one byte string: two
// collectives per call whatever the number of BatchNorm layers.
std::vector<float> ModelBuffers::floats() const {
  std::vector<float> all;
  for (const auto& h : host_) {
    if (h.scalar_type() != torch::kFloat) continue;
    const float* p = h.data_ptr<float>();
    all.insert(all.end(), p, p + h.numel());
  }
  return all;
}

void ModelBuffers::setFloats(const std::vector<float>& all) {
  std::size_t at = 0;
  for (auto& h : host_) {
    if (h.scalar_type() != torch::kFloat) continue;
    std::memcpy(h.data_ptr<float>(), all.data() + at, h.nbytes());
    at += static_cast<std::size_t>(h.numel());
  }
}

void ModelBuffers::broadcastOthers(Collectives& control) {
  std::string mine;
  for (const auto& h : host_) {
    if (h.scalar_type() != torch::kFloat) mine.append(static_cast<const char*>(h.data_ptr()), h.nbytes());
  }
  if (mine.empty()) return;
  const std::string root = control.broadcast(mine, 0, "buffers");
  POSEIDON_ENFORCE_EQ(root.size(), mine.size(), "bytes of the buffers that are not float32");
  std::size_t at = 0;
  for (auto& h : host_) {
    if (h.scalar_type() == torch::kFloat) continue;
    std::memcpy(h.data_ptr(), root.data() + at, h.nbytes());
    at += h.nbytes();
  }
}

void ModelBuffers::broadcast(Collectives& control) {
  auto all = floats();
  if (!all.empty()) {
    control.broadcastFloats(all.data(), all.size(), 0, "buffers");
    setFloats(all);
  }
  broadcastOthers(control);
}

void ModelBuffers::average(Collectives& control, int ranks) {
  const auto all = floats();
  if (!all.empty()) {
    const auto sums = control.allreduceSum(std::vector<double>(all.begin(), all.end()), "buffer average");
    std::vector<float> mean(sums.size());
    for (std::size_t i = 0; i < sums.size(); ++i) mean[i] = static_cast<float>(sums[i] / ranks);
    setFloats(mean);
  }
  broadcastOthers(control);
}

void ModelBuffers::makeEqual(Collectives& control, const std::string& mode, int ranks) {
  if (buffers_.empty()) return;
  toHost();
  if (mode == "average") {
    average(control, ranks);
  } else {
    broadcast(control);
  }
  toDevice();
}

void ModelBuffers::toHost() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].tensor.device().is_cpu()) host_[i].copy_(buffers_[i].tensor.detach());
  }
}

void ModelBuffers::toDevice() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].tensor.device().is_cpu()) buffers_[i].tensor.detach().copy_(host_[i]);
  }
}

void ModelBuffers::addToDigest(Digest& digest) {
  toHost();
  for (const auto& h : host_) digest.update(h.data_ptr(), h.nbytes());
}

void ModelBuffers::addStateRecords(std::vector<StateRecord>& records) const {
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    records.push_back(StateRecord{"buffers/" + buffers_[i].name, host_[i].data_ptr(), host_[i].nbytes()});
  }
}

}  // namespace poseidon
