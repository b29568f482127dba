#include "torch/optimizer_state.h"

#include "poseidon/errors.h"
#include "torch/torch_compat.h"

namespace poseidon {

namespace {

// LibTorch keys a parameter's state by its TensorImpl (as a string in 1.13).
compat::OptimizerStateKey stateKey(const torch::Tensor& p) { return compat::optimizerStateKey(p); }

struct Views {
  std::vector<StateRecord>& records;
  StateMirrors* mirrors;
};

void addView(Views& v, const std::string& name, const torch::Tensor& t) {
  if (!t.defined()) return;
  if (!t.is_contiguous() || (!t.device().is_cpu() && !v.mirrors)) {
    throw InputError("optimizer state " + name + ": checkpoints hold contiguous CPU tensors only");
  }
  if (t.device().is_cpu()) {
    v.records.push_back(StateRecord{name, t.data_ptr(), t.nbytes()});
    return;
  }
  v.mirrors->emplace_back(t, t.detach().to(torch::kCPU));
  const auto& host = v.mirrors->back().second;
  v.records.push_back(StateRecord{name, host.data_ptr(), host.nbytes()});
}

// Adam and AdamW share the state layout and its creation (adam.cpp / adamw.cpp, step()).
template <class State, class GroupOptions>
void adamRecords(torch::optim::Optimizer& opt, const std::string& prefix, Views& records) {
  auto& states = opt.state();
  for (std::size_t g = 0; g < opt.param_groups().size(); ++g) {
    auto& group = opt.param_groups()[g];
    const bool amsgrad = static_cast<GroupOptions&>(group.options()).amsgrad();
    for (std::size_t i = 0; i < group.params().size(); ++i) {
      const auto& p = group.params()[i];
      auto& slot = states[stateKey(p)];
      if (!slot) {
        auto state = std::make_unique<State>();
        state->step(0);
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (amsgrad) state->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(state);
      }
      auto& s = static_cast<State&>(*slot);
      const std::string name = prefix + "/g" + std::to_string(g) + "/p" + std::to_string(i) + "/";
      addView(records, name + "exp_avg", s.exp_avg());
      addView(records, name + "exp_avg_sq", s.exp_avg_sq());
      addView(records, name + "max_exp_avg_sq", s.max_exp_avg_sq());
    }
  }
}

// SGD creates its momentum buffer as a copy of the first gradient; a zero buffer gives the
// same first step (0 * momentum + (1 - dampening) * d) only when dampening is 0.
void sgdRecords(torch::optim::SGD& opt, const std::string& prefix, Views& records) {
  auto& states = opt.state();
  for (std::size_t g = 0; g < opt.param_groups().size(); ++g) {
    auto& group = opt.param_groups()[g];
    const auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
    if (o.momentum() == 0) continue;  // no state at all
    if (o.dampening() != 0) {
      throw InputError("checkpoints of torch::optim::SGD need dampening 0 (its first step differs otherwise)");
    }
    for (std::size_t i = 0; i < group.params().size(); ++i) {
      const auto& p = group.params()[i];
      auto& slot = states[stateKey(p)];
      if (!slot) {
        auto state = std::make_unique<torch::optim::SGDParamState>();
        state->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(state);
      }
      const auto& buf = static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer();
      addView(records, prefix + "/g" + std::to_string(g) + "/p" + std::to_string(i) + "/momentum_buffer", buf);
    }
  }
}

}  // namespace

std::vector<StateRecord> optimizerStateRecords(torch::optim::Optimizer& optimizer, const std::string& prefix,
                                               StateMirrors* mirrors) {
  std::vector<StateRecord> out;
  Views records{out, mirrors};
  if (dynamic_cast<torch::optim::Adam*>(&optimizer)) {
    adamRecords<torch::optim::AdamParamState, torch::optim::AdamOptions>(optimizer, prefix, records);
  } else if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
    adamRecords<torch::optim::AdamWParamState, torch::optim::AdamWOptions>(optimizer, prefix, records);
  } else if (auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    sgdRecords(*sgd, prefix, records);
  } else {
    throw InputError("checkpoints support the optimizers Adam, AdamW and SGD only");
  }
  return out;
}

OptimizerState::OptimizerState(torch::optim::Optimizer& optimizer, std::string prefix)
    : optimizer_(optimizer), prefix_(std::move(prefix)) {
  optimizerStateRecords(optimizer_, prefix_, &mirrors_);  // creates the state (and checks the type) now
}

namespace {

// Calls fn(step count) for every parameter's Adam/AdamW state, in records() order.
template <class State, class Fn>
void visitSteps(torch::optim::Optimizer& opt, Fn&& fn) {
  for (auto& group : opt.param_groups()) {
    for (const auto& p : group.params()) fn(static_cast<State&>(*opt.state().at(stateKey(p))));
  }
}

template <class Fn>
void visitAdamSteps(torch::optim::Optimizer& opt, Fn&& fn) {
  if (dynamic_cast<torch::optim::Adam*>(&opt)) visitSteps<torch::optim::AdamParamState>(opt, fn);
  if (dynamic_cast<torch::optim::AdamW*>(&opt)) visitSteps<torch::optim::AdamWParamState>(opt, fn);
}

}  // namespace

std::vector<StateRecord> OptimizerState::records() {
  mirrors_.clear();
  auto records = optimizerStateRecords(optimizer_, prefix_, &mirrors_);
  steps_.clear();
  visitAdamSteps(optimizer_, [this](auto& state) { steps_.push_back(state.step()); });
  if (!steps_.empty()) {
    records.push_back(StateRecord{prefix_ + "/steps", steps_.data(), steps_.size() * sizeof(std::int64_t)});
  }
  return records;
}

void OptimizerState::afterRestore() {
  std::size_t i = 0;
  visitAdamSteps(optimizer_, [this, &i](auto& state) {
    POSEIDON_ENFORCE(i < steps_.size(), "optimizer step counts");
    state.step(steps_[i++]);
  });
  POSEIDON_ENFORCE_EQ(i, steps_.size(), "optimizer step counts");
  torch::NoGradGuard no_grad;
  for (auto& [state, host] : mirrors_) state.copy_(host);
}

}  // namespace poseidon
