// optimizer.state_dict() of a model whose SGD steps on the servers: the momentum of every
// parameter, most of it held on other ranks (each PS shard its pairs', each allreduce owner
// its slices'), returned by the one rank that asks, as DDP's and Horovod's examples save it
// on rank 0 alone. The asking rank's loop waits in this call, so no other rank's main loop
// can be asked to take part: every rank's transport thread answers instead (kMomentumAsk),
// one message per piece it holds (kMomentum), as the progress probe's questions are answered.
//
// Why the answer is consistent without stopping anyone: under BSP every shard and owner
// needs each worker's contribution before its next step, and the asking worker sends none
// while it waits here, after its own synchronize() saw every layer's newest values (so
// every step of this iteration has run). SSP and straggler dropping step without it and
// are refused (Session::gatherMomentum).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "comm/message.h"
#include "poseidon/state_record.h"

namespace poseidon {

class Transport;

// count floats of one tensor's momentum from its float of.offset on, current on this rank.
struct MomentumPiece {
  ParamSlice of;
  const float* data = nullptr;
  std::int64_t count = 0;
};

class MomentumGather {
 public:
  // `held`: what this rank answers with (on the transport's thread): the pieces of momentum
  // only it keeps current, not those every rank replicates.
  MomentumGather(Transport& transport, std::function<std::vector<MomentumPiece>()> held);

  // kMomentumAsk and kMomentum, on the transport's thread.
  void onMessage(const Message& m);
  // Every other rank's pieces, copied. TimeoutError naming the ranks whose answers did not
  // all come within `limit`.
  std::vector<MomentumValues> gather(std::chrono::milliseconds limit);

 private:
  void answer(const MessageHeader& question);

  Transport& transport_;
  const std::function<std::vector<MomentumPiece>()> held_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint32_t question_ = 0;             // guarded by mu_: the question asked last
  std::vector<std::uint64_t> expected_;    // guarded by mu_: per rank, its answer's pieces (0: none yet)
  std::vector<std::uint64_t> received_;    // guarded by mu_: per rank, the pieces in
  std::vector<MomentumValues> pieces_;     // guarded by mu_
};

// A piece's wire form: layer, tensor (int32 each), offset (int64), then the floats.
Message encodeMomentumPiece(std::uint32_t question, int source, std::uint64_t pieces, const MomentumPiece* piece);
// The piece inside a kMomentum message (none for an empty answer); CommError for a payload
// that does not hold one.
bool decodeMomentumPiece(const Message& m, MomentumValues& out);

}  // namespace poseidon
