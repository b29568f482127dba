#include "torch/buffers.h"

#include <cstring>

#include "comm/control_channel.h"
#include "common/digest.h"
#include "poseidon/errors.h"

namespace poseidon {

ModelBuffers::ModelBuffers(torch::nn::Module& root) {
  for (const auto& b : root.named_buffers(/*recurse=*/true)) {
    const auto& t = b.value();
    if (!t.defined() || t.numel() == 0) continue;
    if (!t.is_contiguous() || !t.device().is_cpu()) {
      throw InputError("buffer '" + b.key() + "': Poseidon keeps contiguous CPU buffers only");
    }
    buffers_.push_back(Buffer{b.key(), t});
  }
}

void ModelBuffers::broadcast(ControlChannel& control) {
  for (auto& b : buffers_) {
    if (b.tensor.scalar_type() == torch::kFloat) {
      control.broadcastFloats(b.tensor.data_ptr<float>(), static_cast<std::size_t>(b.tensor.numel()), 0,
                              "buffer " + b.name);
      continue;
    }
    const std::size_t bytes = b.tensor.nbytes();
    const std::string mine(static_cast<const char*>(b.tensor.data_ptr()), bytes);
    const std::string root = control.broadcast(mine, 0, "buffer " + b.name);
    POSEIDON_ENFORCE_EQ(root.size(), bytes, "bytes of buffer ", b.name);
    std::memcpy(b.tensor.data_ptr(), root.data(), bytes);
  }
}

void ModelBuffers::average(ControlChannel& control, int ranks) {
  std::vector<double> sums;
  for (const auto& b : buffers_) {
    if (b.tensor.scalar_type() != torch::kFloat) continue;
    const float* p = b.tensor.data_ptr<float>();
    sums.insert(sums.end(), p, p + b.tensor.numel());
  }
  if (!sums.empty()) sums = control.allreduceSum(sums, "buffer average");
  std::size_t at = 0;
  for (auto& b : buffers_) {
    if (b.tensor.scalar_type() != torch::kFloat) {
      const std::string root = control.broadcast(
          std::string(static_cast<const char*>(b.tensor.data_ptr()), b.tensor.nbytes()), 0, "buffer " + b.name);
      std::memcpy(b.tensor.data_ptr(), root.data(), b.tensor.nbytes());
      continue;
    }
    float* p = b.tensor.data_ptr<float>();
    for (std::int64_t i = 0; i < b.tensor.numel(); ++i) p[i] = static_cast<float>(sums[at++] / ranks);
  }
}

void ModelBuffers::makeEqual(ControlChannel& control, const std::string& mode, int ranks) {
  if (buffers_.empty()) return;
  if (mode == "average") {
    average(control, ranks);
  } else {
    broadcast(control);
  }
}

void ModelBuffers::addToDigest(Digest& digest) const {
  for (const auto& b : buffers_) digest.update(b.tensor.data_ptr(), b.tensor.nbytes());
}

void ModelBuffers::addStateRecords(std::vector<StateRecord>& records) const {
  for (const auto& b : buffers_) records.push_back(StateRecord{"buffers/" + b.name, b.tensor.data_ptr(), b.tensor.nbytes()});
}

}  // namespace poseidon
