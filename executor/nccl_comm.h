// The NCCL communicator: ranks are GPUs, bootstrapped over MPI (rank 0's unique id is
// broadcast), one communication stream per communicator so that transfers overlap compute.
// Data pointers are device memory of the rank's GPU. Communicators are nonblocking: every
// call and transfer completes by polling under the MPI world's timeout (comm_wait.h) while
// watching NCCL's asynchronous errors; on an error or a timeout the communicator is aborted,
// so that neither this host nor a peer's GPU waits forever, and its later calls fail at once.
#ifndef DITUNE_EXECUTOR_NCCL_COMM_H_
#define DITUNE_EXECUTOR_NCCL_COMM_H_

#include <memory>

#include "executor/comm.h"

namespace ditune::exec {

// Requires an MPI world (`mpi`) of the same ranks; uses GPU (local rank % GPUs).
StatusOr<std::unique_ptr<Comm>> NewNcclWorld(Comm* mpi_world);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_NCCL_COMM_H_
