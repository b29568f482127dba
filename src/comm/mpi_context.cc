#include "comm/mpi_context.h"

#include <cstdlib>

#include "poseidon/errors.h"

namespace poseidon {

MpiContext::MpiContext(int* argc, char*** argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  int provided = 0;
  if (initialised) {
    MPI_Query_thread(&provided);
  } else {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw CommError("MPI_Init_thread failed");
    }
    we_initialised_ = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw CommError("this MPI library does not provide MPI_THREAD_SERIALIZED");
    }
  }
  thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  // Errors come back as return codes, which the transport turns into CommError.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_dup(comm_, &groups_comm_);
}

MpiContext::~MpiContext() {
  if (groups_comm_ != MPI_COMM_NULL) MPI_Comm_free(&groups_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (we_initialised_) MPI_Finalize();
}

void MpiContext::abortJob(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace poseidon
