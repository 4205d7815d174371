// The MPI communicator (OpenMPI): CPU ranks, one process each.
#ifndef DITUNE_EXECUTOR_MPI_COMM_H_
#define DITUNE_EXECUTOR_MPI_COMM_H_

#include <memory>

#include "executor/comm.h"

namespace ditune::exec {

// Initialises MPI once per process (finalised at exit) and returns MPI_COMM_WORLD's
// communicator. Errors return, they do not abort (MPI_ERRORS_RETURN). Its waits give up after
// CommTimeoutFromEnv and open with CommSpinFromEnv's tight phase (comm_wait.h); a bad setting
// of either is InvalidArgument before MPI is initialised.
StatusOr<std::unique_ptr<Comm>> NewMpiWorld(int* argc, char*** argv);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_MPI_COMM_H_
