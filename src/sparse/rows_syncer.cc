#include "sparse/rows_syncer.h"

#include <algorithm>
#include <cstring>

#include "common/digest.h"
#include "coordinator/cost_model.h"
#include "poseidon/errors.h"
#include "sparse/row_message.h"
#include "update/sgd.h"

namespace poseidon {

namespace {
const TensorInfo& tableOf(const InformationBook& book, int layer, const std::vector<float*>& params) {
  const LayerInfo& info = book.model().layers[layer];
  POSEIDON_ENFORCE(info.tensors.size() == 1 && params.size() == 1 && info.tensors[0].shape.size() == 2,
                   "sparse rows need a layer of one rows x width tensor: '", info.name, "'");
  return info.tensors[0];
}
}  // namespace

RowsSyncer::RowsSyncer(int layer, const InformationBook& book, Transport& transport, std::vector<float*> params,
                       const SgdOptions& options, std::chrono::milliseconds timeout, const FailureState& failure,
                       std::uint64_t start_iteration)
    : LayerSyncer(layer, schemeName(Scheme::kRows)),
      book_(book),
      transport_(transport),
      options_(options),
      timeout_(timeout),
      failure_(failure),
      rows_(tableOf(book, layer, params).shape[0]),
      width_(tableOf(book, layer, params).shape[1]),
      weight_(params[0]),
      sum_(static_cast<std::size_t>(rows_ * width_)),
      first_step_(start_iteration == 0),
      workers_(book.cluster().workers()),
      shares_(workers_, layer, "rows"),
      moved_(start_iteration) {
  if (!options_.gradient_only && options_.momentum != 0.0f) momentum_.assign(sum_.size(), 0.0f);
}

LayerSyncer::SendFn RowsSyncer::gradientsReady(std::uint64_t t, std::vector<float*> grads,
                                               std::shared_ptr<const void> owner) {
  POSEIDON_ENFORCE_EQ(grads.size(), std::size_t{1}, "gradients of sparse-rows layer ", layer());
  grad_ = grads[0];
  grad_owner_ = std::move(owner);
  skip_[t % 2] = unused_before_ == t + 1;
  auto rows = std::make_shared<Message>(packRows(layer(), transport_.rank(), t, grad_, rows_, width_));
  return [this, rows] { Send(std::move(*rows)); };
}

void RowsSyncer::Send(Message rows) {
  const int me = transport_.rank();
  rows.setPriority(layer());
  for (int w = 0; w < workers_; ++w) {
    if (w == me) continue;
    transport_.send(w, rows);
    bytes_sent_ += rows.wireBytes();
  }
  deliver(std::move(rows));  // this worker's share, read as the peers read it
}

void RowsSyncer::deliver(Message m) {
  if (m.type() != MsgType::kRows) {
    LayerSyncer::deliver(std::move(m));
    return;
  }
  rowsOf(m, rows_, width_);  // throws on a malformed message, before it is kept
  {
    std::lock_guard<std::mutex> lock(mu_);
    shares_.keep(std::move(m), moved_);
  }
  cv_.notify_all();
}

void RowsSyncer::Receive(std::uint64_t iteration) {
  std::unique_lock<std::mutex> lock(mu_);
  waitFor(
      lock, cv_, [&] { return shares_.complete(iteration); }, timeout_, &failure_,
      detail::cat("rank ", transport_.rank(), ": rows of layer '", book_.model().layers[layer()].name,
                  "' from every worker for iteration ", iteration));
}

void RowsSyncer::Move(std::uint64_t iteration) {
  std::vector<Message> arrived;
  {
    std::lock_guard<std::mutex> lock(mu_);
    arrived = shares_.take(iteration);
  }
  // Every worker's rows in rank order into a zeroed sum: the same additions everywhere.
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  for (const auto& m : arrived) addRows(rowsOf(m, rows_, width_), sum_.data(), width_);
  const SgdOptions o = options_.at(iteration);
  const float scale = 1.0f / static_cast<float>(workers_ * o.devices);
  const bool skip = skip_[iteration % 2];  // no rank used it: left as it is (DDP's rule)
  if (o.gradient_only) {
    // The mean gradient for the user's optimizer, into the gradient this worker handed over.
    if (!skip) sgdStep(grad_, nullptr, {sum_.data()}, scale, rows_ * width_, o, false);
  } else {
    if (!skip) {
      sgdStep(weight_, momentum_.empty() ? nullptr : momentum_.data(), {sum_.data()}, scale, rows_ * width_, o,
              first_step_);
      first_step_ = false;
    }
    // The gradient is consumed: clear the rows this worker sent (its others are zero).
    clearRows(rowsOf(arrived[transport_.rank()], rows_, width_), grad_, rows_, width_);
  }
  grad_owner_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  moved_ = iteration + 1;
}

void RowsSyncer::addStateRecords(std::vector<StateRecord>& records) {
  if (momentum_.empty()) return;
  StateRecord r("rows/" + book_.model().layers[layer()].name + "/weight_momentum", momentum_.data(),
                momentum_.size() * sizeof(float), ParamSlice{layer(), 0, 0});
  r.replicated = true;
  records.push_back(std::move(r));
}

void RowsSyncer::addToDigest(Digest& d) const {
  d.update(weight_, sum_.size() * sizeof(float));
  if (!momentum_.empty()) d.update(momentum_.data(), momentum_.size() * sizeof(float));
}

}  // namespace poseidon
