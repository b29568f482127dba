// A model's buffers (BatchNorm running statistics and counters): not trained, but every
// worker's forward changes its own copy. Kept equal across workers as DDP does: rank 0's
// copied to every rank ("broadcast"), or the workers' mean ("average"; buffers that are not
// float32, such as counters that are the same everywhere, still come from rank 0).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "poseidon/state_record.h"

namespace poseidon {

class Collectives;
class Digest;

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

// A module's buffers (recursively), by path; empty ones left out.
std::vector<NamedTensor> namedBuffers(torch::nn::Module& root);

class ModelBuffers {
 public:
  // Throws InputError for a buffer that is not contiguous. Buffers on a GPU travel through
  // host copies, coalesced as DDP's buffer broadcast does: one flat copy each way per
  // dtype and device, not one per buffer (each a synchronisation: ResNet-50's 159 buffers cost a
  // forward 100 ms on a GPU shared by four ranks). `mirror`: CPU buffers go the same way
  // (tests of that path without a GPU).
  explicit ModelBuffers(std::vector<NamedTensor> buffers, bool mirror = false);

  bool empty() const { return buffers_.empty(); }
  // Collectives: every rank calls them in the same order.
  void broadcast(Collectives& control);
  void average(Collectives& control, int ranks);
  // By mode name ("broadcast" or "average").
  void makeEqual(Collectives& control, const std::string& mode, int ranks);

  void addToDigest(Digest& digest);
  // Views of the host copies: call toHost() before reading them, toDevice() after a restore.
  void addStateRecords(std::vector<StateRecord>& records) const;
  void toHost();
  void toDevice();

 private:
  std::vector<float> floats() const;
  void setFloats(const std::vector<float>& all);
  void broadcastOthers(Collectives& control);

  // The mirrored buffers of one dtype on one device: a flat host tensor, each member a view in it.
  struct Group {
    torch::Tensor host;
    std::vector<std::size_t> members;  // indices into buffers_
  };

  std::vector<NamedTensor> buffers_;  // the model's
  std::vector<torch::Tensor> host_;   // by buffer: the same tensor on the CPU, else its view in a group
  std::vector<Group> groups_;
};

}  // namespace poseidon
