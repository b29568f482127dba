// Which layers no rank used in an iteration: DDP's rule for parameters outside the graph
// (find_unused_parameters=True) is that a parameter some rank used gets the mean with the
// others' zeros, and one that no rank used keeps .grad None, so the optimizer skips it.
// A rank knows only its own use, at the iteration's end (step()). Each rank records it
// there; a rank that did not use some layer asks the others (kUseAsk), and their transport
// threads answer (kUse) once their own loop has recorded that iteration. A job whose ranks
// use every layer sends nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "comm/message.h"

namespace poseidon {

class Transport;

class LayerUse {
 public:
  explicit LayerUse(Transport& transport);

  // This rank's use of each layer in iteration t (its loop's step); answers the questions
  // about t that came before it.
  void record(std::uint64_t t, const std::vector<bool>& used);
  // Per layer: whether no rank used it in iteration t (this rank's own use recorded
  // first). Waits until every rank has recorded t, at most `limit` (TimeoutError naming
  // the ranks that did not answer).
  std::vector<bool> unusedByAll(std::uint64_t t, std::chrono::milliseconds limit);
  // kUseAsk and kUse, on the transport's thread.
  void onMessage(const Message& m);

 private:
  void answer(std::uint64_t t, int to, const std::vector<bool>& used);

  Transport& transport_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_: this rank's use by iteration (the last few), the questions about
  // iterations it has not recorded yet, and the answers to this rank's own question.
  std::map<std::uint64_t, std::vector<bool>> mine_;
  std::vector<std::pair<std::uint64_t, int>> waiting_;
  std::uint64_t asked_ = 0;
  std::vector<std::vector<bool>> answers_;  // by rank; empty: none yet
};

}  // namespace poseidon
