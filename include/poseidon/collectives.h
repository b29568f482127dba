// Small collectives over a job's ranks, for what a program exchanges beside training:
// agreement checks, evaluation sums, digests, a state broadcast. Every rank makes the
// same calls in the same order; `what` names the call in the error if a rank is missing.
// A session has one (Session::control()); Runtime::newCollectives() makes one of its own.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace poseidon {

class Collectives {
 public:
  virtual ~Collectives() = default;
  // Every rank contributes a byte string; every rank gets all of them, indexed by rank.
  virtual std::vector<std::string> allgather(const std::string& mine, const std::string& what) = 0;
  // Rank `root`'s `data` is copied to every rank.
  virtual std::string broadcast(const std::string& data, int root, const std::string& what) = 0;
  // Rank `root`'s bytes overwrite `data[0..bytes)` on every rank.
  virtual void broadcastBytes(void* data, std::size_t bytes, int root, const std::string& what) = 0;
  void broadcastFloats(float* data, std::size_t n, int root, const std::string& what) {
    broadcastBytes(data, n * sizeof(float), root, what);
  }
  virtual void barrier(const std::string& what) = 0;
  // Elementwise sums over the ranks, on every rank.
  virtual std::vector<double> allreduceSum(const std::vector<double>& mine, const std::string& what) = 0;
};

}  // namespace poseidon
