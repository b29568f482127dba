#include "comm/job_channel.h"

#include "poseidon/errors.h"

namespace poseidon {

JobChannel::JobChannel(std::unique_ptr<Transport> transport, std::chrono::milliseconds timeout)
    : transport_(std::move(transport)), control_(*transport_, timeout, failure_) {
  transport_->start(TransportCallbacks{[this](Message m) {
                                         if (m.header().type == static_cast<std::uint16_t>(MsgType::kControl)) {
                                           control_.onMessage(std::move(m));
                                           return;
                                         }
                                         failure_.set(std::make_exception_ptr(CommError(
                                             detail::cat("rank ", m.header().source, " sent a training message (type ",
                                                         m.header().type, ") to a job's collectives"))));
                                       },
                                       [this](std::exception_ptr e) { failure_.set(e); }});
}

JobChannel::~JobChannel() {
  // What this rank sent (a broadcast's root) reaches the others before the transport goes.
  transport_->stop();
}

std::vector<std::string> JobChannel::allgather(const std::string& mine, const std::string& what) {
  return control_.allgather(mine, what);
}
std::string JobChannel::broadcast(const std::string& data, int root, const std::string& what) {
  // In bounded chunks (a pickled optimizer state may pass the transport's message limit):
  // the length first, then the bytes.
  std::uint64_t bytes = data.size();
  control_.broadcastBytes(&bytes, sizeof(bytes), root, what);
  std::string out = data;
  out.resize(bytes);
  control_.broadcastBytes(out.data(), out.size(), root, what);
  return out;
}
void JobChannel::broadcastBytes(void* data, std::size_t bytes, int root, const std::string& what) {
  control_.broadcastBytes(data, bytes, root, what);
}
void JobChannel::barrier(const std::string& what) { control_.barrier(what); }
std::vector<double> JobChannel::allreduceSum(const std::vector<double>& mine, const std::string& what) {
  return control_.allreduceSum(mine, what);
}

}  // namespace poseidon
