// An engine task that ends on an event from outside the engine, such as autograd
// producing a gradient. The task is pushed ahead of time (so its place in every tag's
// order is fixed); it is finished once the engine has started it (arm) and the event has
// happened (fire), whichever comes second. Reusable: one arm and one fire per round.
#pragma once

#include <mutex>

#include "engine/engine.h"

namespace poseidon {

class ExternalEvent {
 public:
  // The body of the pushed task: engine.pushAsync([&e](Engine::Done d) { e.arm(std::move(d)); }, ...).
  void arm(Engine::Done done) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!fired_) {
      armed_ = std::move(done);
      return;
    }
    fired_ = false;
    lock.unlock();
    done();
  }
  // The event happened.
  void fire() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_) {
      fired_ = true;
      return;
    }
    auto done = std::move(armed_);
    armed_ = nullptr;
    lock.unlock();
    done();
  }

 private:
  std::mutex mu_;
  Engine::Done armed_;  // guarded by mu_
  bool fired_ = false;  // guarded by mu_
};

}  // namespace poseidon
