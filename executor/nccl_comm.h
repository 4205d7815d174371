// The NCCL communicator: ranks are GPUs, bootstrapped over MPI (rank 0's unique id is
// broadcast), one communication stream per communicator so that transfers overlap compute.
// Data pointers are device memory of the rank's GPU. Every NCCL error is checked; on one the
// communicator is aborted so that no peer hangs.
#ifndef DITUNE_EXECUTOR_NCCL_COMM_H_
#define DITUNE_EXECUTOR_NCCL_COMM_H_

#include <memory>

#include "executor/comm.h"

namespace ditune::exec {

// Requires an MPI world (`mpi`) of the same ranks; uses GPU (local rank % GPUs).
StatusOr<std::unique_ptr<Comm>> NewNcclWorld(Comm* mpi_world);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_NCCL_COMM_H_
