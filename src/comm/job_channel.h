// Collectives on a transport of their own (Runtime::newCollectives): what a program
// exchanges outside any session (Horovod's broadcast_parameters, a checkpoint's agreement
// that every rank can write) goes through Poseidon's transport as everything else does,
// not through MPI_COMM_WORLD. The transport (on a communicator of its own, so that a
// session alive beside it keeps its messages apart) lives as long as this object: made for
// one exchange and dropped after it, it leaves no thread polling beside training.
#pragma once

#include <chrono>
#include <memory>

#include "comm/control_channel.h"
#include "comm/transport.h"
#include "common/wait.h"
#include "poseidon/collectives.h"

namespace poseidon {

class JobChannel final : public Collectives {
 public:
  JobChannel(std::unique_ptr<Transport> transport, std::chrono::milliseconds timeout);
  ~JobChannel() override;

  std::vector<std::string> allgather(const std::string& mine, const std::string& what) override;
  std::string broadcast(const std::string& data, int root, const std::string& what) override;
  void broadcastBytes(void* data, std::size_t bytes, int root, const std::string& what) override;
  void barrier(const std::string& what) override;
  std::vector<double> allreduceSum(const std::vector<double>& mine, const std::string& what) override;

 private:
  std::unique_ptr<Transport> transport_;
  FailureState failure_;
  ControlChannel control_;
};

}  // namespace poseidon
