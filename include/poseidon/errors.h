// The error model of the library: typed exceptions. The CLI turns each into one line
// and a non-zero exit; nothing in the library calls abort() on a recoverable error.
#pragma once

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>

namespace poseidon {

// Base of every error the library throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user gave something wrong: a flag, a file, a model description.
class InputError : public Error {
 public:
  using Error::Error;
};

// A wait ran past its deadline: a peer died, stalled, or the network is gone.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A timeout whose message names what this rank saw go silent: some of the workers that
// should have sent it something (`names_worker`: the likely stalled rank), or only shards
// whose values never came (which may be waiting on that rank in turn) or every peer at
// once (this rank may be the one cut off). The progress probe (client/progress_probe.h)
// makes one naming a worker where it names a rank (stalled behind, or silent while others
// answer), and explains one naming no worker further without changing its kind otherwise.
class CulpritTimeout final : public TimeoutError {
 public:
  CulpritTimeout(const std::string& what, bool names_worker) : TimeoutError(what), names_worker_(names_worker) {}
  bool namesWorker() const { return names_worker_; }

  // How long a rank whose timeout does not name a worker waits before ending the job (the
  // CLI, and Python's uncaught-exception hook), so that a rank that saw the stalled one
  // directly ends it with "rank N sent no update": that rank's deadline falls within about
  // an iteration of this one's, then its teardown settles the transport for up to 2 s
  // (session.cc's kSettleLimit). Whoever calls MPI_Abort first ends every rank.
  static constexpr std::chrono::seconds kIndirectWitnessGrace{3};

 private:
  bool names_worker_;
};

// The transport failed or received bytes that are not a valid message.
class CommError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace poseidon

// Internal invariant: throws poseidon::Error with file:line and the message.
#define POSEIDON_ENFORCE(cond, ...)                                                                             \
  do {                                                                                                          \
    if (!(cond)) {                                                                                              \
      throw ::poseidon::Error(                                                                                  \
          ::poseidon::detail::cat(__FILE__, ":", __LINE__, ": ", "check '" #cond "' failed: ", ##__VA_ARGS__)); \
    }                                                                                                           \
  } while (0)

// Internal invariant on two values: names both values in the message.
#define POSEIDON_ENFORCE_EQ(a, b, ...)                                                                                 \
  do {                                                                                                                 \
    const auto& _pa = (a);                                                                                             \
    const auto& _pb = (b);                                                                                             \
    if (!(_pa == _pb)) {                                                                                               \
      throw ::poseidon::Error(::poseidon::detail::cat(__FILE__, ":", __LINE__, ": ", #a, " == ", #b, " failed (", _pa, \
                                                      " vs ", _pb, ") ", ##__VA_ARGS__));                              \
    }                                                                                                                  \
  } while (0)
