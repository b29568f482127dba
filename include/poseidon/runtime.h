// The process-level runtime of one rank: MPI initialised for the lifetime of the object
// and Poseidon's MPI transport on a duplicated communicator. Create one per process and
// pass it to the objects that need it.
#pragma once

#include <chrono>
#include <memory>

#include "poseidon/collectives.h"

namespace poseidon {

class Transport;
class MpiContext;

class Runtime {
 public:
  // Initialises MPI (works under mpirun and as a singleton without it).
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const;
  int size() const;
  Transport& transport();
  // Another transport, on a communicator of its own, for a later session of this process:
  // a transport carries one session, and sessions of a process run one after another;
  // their own communicators keep a late message of one from reaching the next.
  std::unique_ptr<Transport> newTransport();
  // Collectives on a transport of their own, for an exchange outside any session (a
  // broadcast of state, an agreement). Every rank makes them together; a call that waits
  // longer than `timeout` for a rank fails.
  std::unique_ptr<Collectives> newCollectives(std::chrono::milliseconds timeout);
  // Ends every rank of the job: for an error that only this rank has seen, when the
  // others would otherwise wait for it until their timeout.
  [[noreturn]] void abortJob(int code);

 private:
  std::unique_ptr<MpiContext> mpi_;
  std::unique_ptr<Transport> transport_;
};

}  // namespace poseidon
