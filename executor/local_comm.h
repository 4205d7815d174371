// The one-rank communicator: collectives copy, point-to-point loops back through a mailbox.
#ifndef DITUNE_EXECUTOR_LOCAL_COMM_H_
#define DITUNE_EXECUTOR_LOCAL_COMM_H_

#include <memory>

#include "executor/comm.h"

namespace ditune::exec {

std::unique_ptr<Comm> NewLocalComm();

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_LOCAL_COMM_H_
