#include "torch/buffers.h"

#include <algorithm>
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

ModelBuffers::ModelBuffers(std::vector<NamedTensor> buffers, bool mirror) {
  std::vector<std::size_t> mirrored;
  for (auto& b : buffers) {
    const auto& t = b.tensor;
    if (!t.defined() || t.numel() == 0) continue;
    if (!t.is_contiguous()) throw InputError("buffer '" + b.name + "': Poseidon keeps contiguous buffers only");
    if (mirror || !t.device().is_cpu()) mirrored.push_back(buffers_.size());
    host_.push_back(t);
    buffers_.push_back(std::move(b));
  }
  for (std::size_t i : mirrored) {
    // By dtype and device: one flat copy per group (a module split over devices has several).
    const auto& t = buffers_[i].tensor;
    auto group = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) {
      const auto& first = buffers_[g.members[0]].tensor;
      return first.scalar_type() == t.scalar_type() && first.device() == t.device();
    });
    if (group == groups_.end()) group = groups_.insert(groups_.end(), Group{});
    group->members.push_back(i);
  }
  for (auto& g : groups_) {
    const auto& first = buffers_[g.members[0]].tensor;
    std::int64_t total = 0;
    for (std::size_t i : g.members) total += buffers_[i].tensor.numel();
    // Pinned where a device copies from it: the copies then go by DMA, not a staging buffer.
    g.host = torch::empty({total}, torch::TensorOptions().dtype(first.scalar_type()).pinned_memory(!first.device().is_cpu()));
    std::int64_t at = 0;
    for (std::size_t i : g.members) {
      const auto& t = buffers_[i].tensor;
      host_[i] = g.host.narrow(0, at, t.numel()).view(t.sizes());
      at += t.numel();
    }
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
  for (auto& g : groups_) {
    std::vector<torch::Tensor> flat;
    for (std::size_t i : g.members) flat.push_back(buffers_[i].tensor.detach().reshape({-1}));
    g.host.copy_(flat.size() == 1 ? flat[0] : torch::cat(flat));  // one copy, one wait
  }
}

void ModelBuffers::toDevice() {
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    // One copy over the bus (waited for: the host values may change next), then the
    // device spreads it into the buffers, queued on the current stream.
    const auto on_device = g.host.to(buffers_[g.members[0]].tensor.device());
    std::int64_t at = 0;
    for (std::size_t i : g.members) {
      auto t = buffers_[i].tensor.detach();
      t.copy_(on_device.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
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
