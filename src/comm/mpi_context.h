// MPI's lifetime tied to an object: MPI_Init_thread in the constructor, MPI_Finalize in a
// destructor that never throws. Poseidon works on its own duplicate of MPI_COMM_WORLD so
// that it cannot collide with anything else in the process that uses MPI.
#pragma once

#include <mpi.h>

namespace poseidon {

class MpiContext {
 public:
  // Asks for MPI_THREAD_MULTIPLE (engine threads issue collectives while the transport's
  // progress thread sends) and requires at least MPI_THREAD_SERIALIZED, which is all the
  // message transport alone needs.
  MpiContext(int* argc, char*** argv);
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  MPI_Comm comm() const { return comm_; }
  // The parent of communicators over some ranks only (MPI_Comm_create_group): its
  // point-to-point traffic uses the caller's tag on the parent, so the parent must be one
  // nobody receives on with MPI_ANY_TAG, as the transport does on comm().
  MPI_Comm groupsComm() const { return groups_comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool threadMultiple() const { return thread_multiple_; }
  // Ends every rank of the job (MPI_Abort); for errors that only some ranks see.
  [[noreturn]] void abortJob(int code) const;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm groups_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool we_initialised_ = false;
  bool thread_multiple_ = false;
};

}  // namespace poseidon
