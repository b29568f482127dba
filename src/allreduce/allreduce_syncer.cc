#include "allreduce/allreduce_syncer.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "allreduce/communicator.h"
#include "checkpoint/state_file.h"
#include "comm/transport.h"
#include "common/digest.h"
#include "coordinator/cost_model.h"
#include "engine/external_event.h"
#include "poseidon/errors.h"
#include "poseidon/timeline.h"

namespace poseidon {

struct AllreduceBuckets::Layer {
  int id = 0;
  std::vector<float*> params;
  std::vector<std::int64_t> sizes;
  std::vector<std::vector<float>> momentum;
  bool first_step = true;
  // 1 + the last iteration that no rank used this layer in (skipUnused): its step leaves it
  // as it is, as an optimizer skips a parameter whose .grad is None.
  std::atomic<std::uint64_t> unused_before{0};
  bool skipped(std::uint64_t t) const { return unused_before.load(std::memory_order_acquire) == t + 1; }
  Engine::Tag grad_tag = 0;
  ExternalEvent gradient;  // the iteration's gradient task ends when autograd reports it
  std::mutex mu;
  std::vector<float*> grads;  // guarded by mu: this iteration's gradient buffers
};

// The bucket's gradients go into `in`; the step reads the sums where the store keeps them
// (`sums`, under `sums_tag`), with no copy out.
// By owner (stepByOwner()), the collective steps this rank's slice of `params` and fills in
// the others' slices; the sums are not kept.
struct AllreduceBuckets::Bucket {
  int key = 0;
  FusedBucket plan;
  std::vector<float> in;  // this worker's gradients
  const float* sums = nullptr;
  PiecedBuffer params;  // the layers' tensors in bucket order
  Engine::Tag in_tag = 0, sums_tag = 0, params_tag = 0;
};

AllreduceBuckets::AllreduceBuckets(const ModelInfo& model, const std::vector<int>& layers,
                                   const std::vector<std::vector<float*>>& params, Transport& transport,
                                   const AllreduceOptions& options, FailureState& failure,
                                   std::function<void(int)> on_done)
    : failure_(failure),
      sgd_(options.sgd),
      timeline_(options.timeline),
      before_copy_(options.before_copy),
      after_step_(options.after_step),
      workers_(transport.size()),
      rank_(transport.rank()),
      wire_(options.kvstore.wire),
      by_owner_(stepByOwner(options)),
      on_done_(std::move(on_done)),
      layers_(model.layers.size()),
      // One compute thread applies the steps (by owner the comm threads step, inside the
      // collective), one copies, the design decides the comm threads.
      engine_(Engine::Threads{1, 1, options.kvstore.commThreads()}, failure) {
  std::vector<std::pair<int, std::int64_t>> order;  // back-propagation order
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const int l = *it;
    auto layer = std::make_unique<Layer>();
    layer->id = l;
    layer->first_step = options.start_iteration == 0;
    layer->params = params.at(l);
    for (const auto& t : model.layers.at(l).tensors) {
      layer->sizes.push_back(t.numel());
      layer->momentum.emplace_back(sgd_.momentum != 0.0f ? t.numel() : 0);
    }
    layer->grad_tag = engine_.newTag(model.layers[l].name + " gradient");
    order.emplace_back(l, model.layers[l].numel());
    layers_[l] = std::move(layer);
  }
  store_ = KVStore::create(options.kvstore, engine_, transport, failure);
  auto plans = fuseLayers(order, options.fusion_bytes);
  for (auto& plan : plans) {
    auto b = std::make_unique<Bucket>();
    // Keys number the buckets in forward order, as MXNet numbers a model's parameters; the
    // buckets themselves are kept in back-propagation order, the order of the pushes.
    b->key = static_cast<int>(plans.size() - 1 - buckets_.size());
    b->in.resize(plan.floats);
    b->plan = std::move(plan);
    b->in_tag = engine_.newTag(detail::cat("bucket ", b->key, " in"));
    b->params_tag = engine_.newTag(detail::cat("bucket ", b->key, " parameters"));
    // init stores rank 0's parameters; the session has broadcast them already, so this
    // only fills the store's buffers (by owner there are none: the tensors are the values).
    for (std::size_t i = 0; i < b->plan.layers.size(); ++i) {
      const Layer& layer = *layers_[b->plan.layers[i]];
      std::int64_t at = b->plan.offsets[i];
      for (std::size_t t = 0; t < layer.params.size(); ++t) {
        if (!by_owner_) std::memcpy(b->in.data() + at, layer.params[t], layer.sizes[t] * sizeof(float));
        at += layer.sizes[t];
        b->params.pieces.push_back(layer.params[t]);
        b->params.sizes.push_back(static_cast<std::size_t>(layer.sizes[t]));
      }
    }
    store_->init(b->key, b->in.data(), b->in.size(), by_owner_);
    if (!by_owner_) b->sums = store_->value(b->key);
    b->sums_tag = store_->tag(b->key);
    buckets_.push_back(std::move(b));
  }
}

AllreduceBuckets::~AllreduceBuckets() {
  stop();
  if (store_->abandoned()) {
    // MPI may still write a collective's result into the store's values and read the
    // buckets: both stay, leaked on purpose, until the failing job ends.
    static_cast<void>(store_.release());
    for (auto& b : buckets_) static_cast<void>(b.release());
  }
}

void AllreduceBuckets::stop() {
  if (stopped_) return;
  stopped_ = true;
  store_->stop();
  engine_.shutdown();
}

void AllreduceBuckets::schedule(std::uint64_t t) {
  for (auto& b : buckets_) {
    Bucket* bucket = b.get();
    for (std::size_t i = 0; i < bucket->plan.layers.size(); ++i) {
      Layer* layer = layers_[bucket->plan.layers[i]].get();
      const std::int64_t offset = bucket->plan.offsets[i];
      engine_.pushAsync([layer](Engine::Done done) { layer->gradient.arm(std::move(done)); }, {}, {layer->grad_tag},
                        Engine::Kind::kCopy);
      engine_.push([this, layer, bucket, offset, t] { copyIn(*layer, *bucket, offset, t); }, {layer->grad_tag},
                   {bucket->in_tag}, Engine::Kind::kCopy);
    }
    // The collective mutates sums_tag: it waits for the last iteration's step to have read
    // the sums it overwrites (by owner: for apply() to have ended the last iteration).
    if (by_owner_) {
      store_->pushStepped(bucket->key, bucket->in.data(), bucket->in_tag, &bucket->params,
                          [this, bucket, t](std::size_t begin, std::size_t n, const std::vector<GradientView>& from) {
                            stepSlice(*bucket, t, begin, n, from);
                          });
    } else {
      store_->push(bucket->key, bucket->in.data(), bucket->in_tag);
    }
  }
  for (auto& b : buckets_) {
    Bucket* bucket = b.get();
    engine_.push([this, bucket, t] { apply(*bucket, t); }, {bucket->sums_tag}, {bucket->params_tag},
                 Engine::Kind::kCompute);
  }
}

void AllreduceBuckets::gradientReady(int layer, std::vector<float*> grads) {
  Layer* l = layers_.at(layer).get();
  POSEIDON_ENFORCE(l != nullptr, "layer ", layer, " does not go by allreduce");
  {
    std::lock_guard<std::mutex> lock(l->mu);
    l->grads = std::move(grads);
  }
  l->gradient.fire();
}

void AllreduceBuckets::copyIn(Layer& layer, Bucket& bucket, std::int64_t offset, std::uint64_t t) {
  TimelineSpan span(timeline_, "engine copy", timeline_ ? detail::cat("copy layer ", layer.id) : "", "allreduce");
  std::vector<float*> grads;
  {
    std::lock_guard<std::mutex> lock(layer.mu);
    grads = layer.grads;
  }
  POSEIDON_ENFORCE_EQ(grads.size(), layer.sizes.size(), "gradient tensors of an allreduce layer");
  // The node's whole batch goes into the collective, as one worker's (the mean divides by
  // every device: sgd_.devices counts them).
  if (before_copy_) before_copy_(layer.id, t, grads);
  float* to = bucket.in.data() + offset;
  for (std::size_t t = 0; t < grads.size(); ++t) {
    const std::size_t bytes = layer.sizes[t] * sizeof(float);
    std::memcpy(to, grads[t], bytes);
    // The engine accumulates into its gradients; the next backward starts from zero.
    std::memset(grads[t], 0, bytes);
    to += layer.sizes[t];
  }
}

bool AllreduceBuckets::stepByOwner(const AllreduceOptions& o) {
  // Gradient mode needs the mean everywhere, and a node's hooks work on whole layers. A
  // 16-bit wire steps by owner too: its owners send 16-bit updates, as many bytes as sums.
  return !o.sgd.gradient_only && !o.before_copy && !o.after_step;
}

void AllreduceBuckets::stepSlice(Bucket& bucket, std::uint64_t t, std::size_t begin, std::size_t n,
                                 const std::vector<GradientView>& from) {
  // Inside the collective's timeline span (its thread's track): no span of its own.
  const SgdOptions step = sgd_.at(t);
  const float scale = 1.0f / static_cast<float>(workers_ * step.devices);
  const std::size_t end = begin + n;
  std::vector<GradientView> here(from.size());
  for (std::size_t i = 0; i < bucket.plan.layers.size(); ++i) {
    Layer& layer = *layers_[bucket.plan.layers[i]];
    auto at = static_cast<std::size_t>(bucket.plan.offsets[i]);
    for (std::size_t k = 0; k < layer.params.size(); at += static_cast<std::size_t>(layer.sizes[k]), ++k) {
      const std::size_t lo = std::max(begin, at), hi = std::min(end, at + static_cast<std::size_t>(layer.sizes[k]));
      if (lo >= hi || layer.skipped(t)) continue;
      float* momentum = layer.momentum[k].empty() ? nullptr : layer.momentum[k].data() + (lo - at);
      for (std::size_t r = 0; r < from.size(); ++r) here[r] = from[r].from(lo - begin);
      sgdStepViews(layer.params[k] + (lo - at), momentum, here, scale, static_cast<std::int64_t>(hi - lo), step,
                   layer.first_step);
    }
  }
}

void AllreduceBuckets::apply(Bucket& bucket, std::uint64_t t) {
  TimelineSpan span(timeline_, "engine compute", timeline_ ? detail::cat("apply key ", bucket.key) : "", "allreduce");
  if (by_owner_) {  // the collective stepped and gathered the parameters
    for (int l : bucket.plan.layers) {
      if (!layers_[l]->skipped(t)) layers_[l]->first_step = false;
      on_done_(l);
    }
    return;
  }
  const SgdOptions step = sgd_.at(t);
  const float scale = 1.0f / static_cast<float>(workers_ * step.devices);
  for (std::size_t i = 0; i < bucket.plan.layers.size(); ++i) {
    Layer& layer = *layers_[bucket.plan.layers[i]];
    if (layer.skipped(t)) {  // gradient mode: its .grad, zeros, goes back to None (AutogradSync)
      if (after_step_) after_step_(layer.id, t);
      on_done_(layer.id);
      continue;
    }
    const float* sum = bucket.sums + bucket.plan.offsets[i];
    // Gradient mode: the mean goes into the gradients the user's optimizer reads.
    std::vector<float*> targets = layer.params;
    if (step.gradient_only) {
      std::lock_guard<std::mutex> lock(layer.mu);
      targets = layer.grads;
    }
    for (std::size_t k = 0; k < layer.params.size(); ++k) {
      sgdStep(targets[k], layer.momentum[k].empty() ? nullptr : layer.momentum[k].data(), {sum}, scale, layer.sizes[k],
              step, layer.first_step);
      sum += layer.sizes[k];
    }
    layer.first_step = false;
    if (after_step_) after_step_(layer.id, t);
    on_done_(layer.id);
  }
}

std::string AllreduceBuckets::summary() const {
  std::size_t layers = 0;
  for (const auto& b : buckets_) layers += b->plan.layers.size();
  return detail::cat(layers, " layer", layers == 1 ? "" : "s", " by allreduce in ", buckets_.size(), " collective",
                     buckets_.size() == 1 ? "" : "s", " per iteration, KVStore design ",
                     kvstoreTypeName(store_->type()));
}

std::int64_t AllreduceBuckets::floatsOfLayer(int layer) const {
  const Layer* l = layers_.at(layer).get();
  if (!l) return 0;
  std::int64_t n = 0;
  for (auto s : l->sizes) n += s;
  return n;
}

// By owner the records still hold whole tensors' momentum, current where the rank owns the
// slice: a resumed run (the same ranks) reads its own slices, and a checkpoint of the
// replicated step resumes alike.
void AllreduceBuckets::addStateRecords(std::vector<StateRecord>& records) {
  addMomentumRecords(records);
  store_->addStateRecords(records);
}

void AllreduceBuckets::addMomentumRecords(std::vector<StateRecord>& records) {
  for (auto& b : buckets_) {
    const sum16::Slices slices(b->in.size(), workers_);  // by owner: this rank's, as the communicators cut
    const auto mine_begin = static_cast<std::int64_t>(slices.begin(rank_));
    const auto mine_end = static_cast<std::int64_t>(slices.begin(rank_ + 1));
    for (std::size_t i = 0; i < b->plan.layers.size(); ++i) {
      Layer& l = *layers_[b->plan.layers[i]];
      std::int64_t at = b->plan.offsets[i];
      for (std::size_t k = 0; k < l.momentum.size(); at += l.sizes[k], ++k) {
        if (l.momentum[k].empty()) continue;
        StateRecord r{detail::cat("allreduce/layer", l.id, "/tensor", k, "/momentum"), l.momentum[k].data(),
                      l.momentum[k].size() * sizeof(float), ParamSlice{l.id, static_cast<int>(k), 0}};
        r.replicated = !by_owner_;
        if (by_owner_) {  // current on this rank: its slice (before any step, all of it, as on every rank)
          r.current_begin = std::clamp<std::int64_t>(mine_begin - at, 0, l.sizes[k]);
          r.current_count = std::clamp<std::int64_t>(mine_end - at, 0, l.sizes[k]) - r.current_begin;
        }
        records.push_back(r);
      }
    }
  }
}

void AllreduceBuckets::skipUnused(std::uint64_t t, const std::vector<bool>& unused) {
  for (auto& l : layers_) {
    if (l && unused.at(static_cast<std::size_t>(l->id))) l->unused_before.store(t + 1, std::memory_order_release);
  }
}

void AllreduceBuckets::momentumSeeded() {
  for (auto& l : layers_) {
    if (l) l->first_step = false;
  }
}

void AllreduceBuckets::addToDigest(Digest& d) const {
  for (const auto& l : layers_) {
    if (!l) continue;
    for (std::size_t k = 0; k < l->params.size(); ++k) {
      d.update(l->params[k], l->sizes[k] * sizeof(float));
      // By owner each rank keeps the momentum of its slices current, not of the others':
      // it is not replicated, as a shard's is not.
      if (!by_owner_) d.update(l->momentum[k].data(), l->momentum[k].size() * sizeof(float));
    }
  }
}

AllreduceSyncer::AllreduceSyncer(int layer, AllreduceBuckets& collective)
    : LayerSyncer(layer, schemeName(Scheme::kAllreduce)), collective_(collective) {}

// No `owner`: the buckets copy the gradient in before the sync waits.
LayerSyncer::SendFn AllreduceSyncer::gradientsReady(std::uint64_t, std::vector<float*> grads,
                                                    std::shared_ptr<const void> /*owner*/) {
  ++synced_;
  return [c = &collective_, layer = layer(), grads = std::move(grads)] { c->gradientReady(layer, grads); };
}

std::uint64_t AllreduceBuckets::bytesOfLayer(int layer) const {
  // A layer's share of its bucket's collective; the 16-bit slices' scales (a few bytes per
  // collective) are counted by the communicator, not here.
  return allreduceBytesSent(floatsOfLayer(layer), workers_) * wireBytesPerFloat(wire_) / sizeof(float);
}

std::uint64_t AllreduceSyncer::bytesSent() const { return collective_.bytesOfLayer(layer()) * synced_; }

}  // namespace poseidon
