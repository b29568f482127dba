#include "node/node_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>
#include <utility>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);
constexpr std::size_t kAlignFloats = 16;  // every region starts on a cache line

struct Layout {
  std::vector<std::size_t> slots, values, slot_floats;
  std::size_t bytes = 0;
};

std::size_t padded(std::size_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// The same on every rank of a node: the model and plan are agreed before this.
Layout layoutOf(const ModelInfo& model, const std::vector<bool>& gathered, int per_node) {
  Layout out;
  std::size_t at = 0;  // floats
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const std::size_t n = padded(static_cast<std::size_t>(model.layers[l].numel()));
    out.slot_floats.push_back(n);
    out.slots.push_back(gathered[l] ? at * sizeof(float) : kNone);
    if (gathered[l]) at += n * static_cast<std::size_t>(per_node - 1);
    out.values.push_back(at * sizeof(float));
    at += n;
  }
  out.bytes = at * sizeof(float);
  return out;
}

// The leader's segment, reserved up front (a tmpfs without room fails here, not with a
// SIGBUS on some later write); "" where it cannot be made.
std::string createSegment(std::size_t bytes, int node, void** base) {
  std::random_device random;
  const std::string name = detail::cat("/poseidon-", ::getpid(), "-node", node, "-", random(), random());
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return "";
  void* p = MAP_FAILED;
  int rc = EINTR;  // a signal (the MPI runtime's, a profiler's) may interrupt a large reservation
  for (int tries = 0; rc == EINTR && tries < 100; ++tries) rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc == 0) {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return "";
  }
  *base = p;
  return name;
}

// A device's view of its leader's segment; null where it is not there (another host).
void* mapSegment(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* p = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) == bytes) {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

std::unique_ptr<NodeMemory> NodeMemory::open(ControlChannel& control, const NodeMap& nodes, int rank,
                                             const ModelInfo& model, const std::vector<bool>& gathered) {
  POSEIDON_ENFORCE(nodes.hierarchical(), "shared memory is for the ranks of a node");
  POSEIDON_ENFORCE_EQ(gathered.size(), model.layers.size(), "layers of the node memory");
  Layout layout = layoutOf(model, gathered, nodes.devicesPerNode());
  const int node = nodes.nodeOf(rank);
  const bool leads = nodes.isLeader(rank);
  void* base = nullptr;
  // However this ends (an allgather may time out), the leader's name goes when it returns,
  // and the mapping too unless a NodeMemory takes it.
  struct Cleanup {
    std::string name;  // the leader's
    void* base = nullptr;
    std::size_t bytes = 0;
    ~Cleanup() {
      if (!name.empty()) ::shm_unlink(name.c_str());
      if (base != nullptr) ::munmap(base, bytes);
    }
  } cleanup;
  cleanup.bytes = layout.bytes;
  std::string name = leads ? createSegment(layout.bytes, node, &base) : "";
  cleanup.name = name;
  cleanup.base = base;
  const auto names = control.allgather(name, "shared memory names");
  if (!leads) {
    name = names.at(static_cast<std::size_t>(nodes.leader(node)));
    if (!name.empty()) base = cleanup.base = mapSegment(name, layout.bytes);
  }
  const auto mapped = control.allgather(base != nullptr ? "1" : "0", "shared memory mapped");
  bool everyone = true;
  for (int r = nodes.leader(node); r < nodes.leader(node) + nodes.devicesPerNode(); ++r) {
    everyone = everyone && mapped.at(static_cast<std::size_t>(r)) == "1";
  }
  if (!everyone) return nullptr;
  cleanup.base = nullptr;  // the NodeMemory unmaps it
  return std::unique_ptr<NodeMemory>(new NodeMemory(base, layout.bytes, std::move(layout.slots),
                                                    std::move(layout.values), std::move(layout.slot_floats)));
}

NodeMemory::NodeMemory(void* base, std::size_t bytes, std::vector<std::size_t> slots, std::vector<std::size_t> values,
                       std::vector<std::size_t> slot_floats)
    : base_(base),
      bytes_(bytes),
      slots_(std::move(slots)),
      values_(std::move(values)),
      slot_floats_(std::move(slot_floats)) {}

NodeMemory::~NodeMemory() { ::munmap(base_, bytes_); }

float* NodeMemory::slot(int layer, int device) const {
  const std::size_t at = slots_.at(static_cast<std::size_t>(layer));
  if (at == kNone) return nullptr;
  return reinterpret_cast<float*>(static_cast<char*>(base_) + at) +
         static_cast<std::size_t>(device) * slot_floats_[layer];
}

float* NodeMemory::values(int layer) const {
  return reinterpret_cast<float*>(static_cast<char*>(base_) + values_.at(static_cast<std::size_t>(layer)));
}

}  // namespace poseidon
