// A communicator that stands in for the other ranks of a multi-device plan: one process runs
// exactly rank R's share while every transfer is skipped (outputs filled with this rank's own
// data or zeros) and its time is charged from the communication model instead. Results are
// meaningless; timings of the rank's own compute are real. For `ditune run --emulate-rank`.
#ifndef DITUNE_EXECUTOR_EMULATED_COMM_H_
#define DITUNE_EXECUTOR_EMULATED_COMM_H_

#include <functional>
#include <memory>
#include <string>

#include "executor/comm.h"

namespace ditune::exec {

// Seconds a collective would take: (op name as in CollectiveName, bytes in nccl-tests'
// convention, group size).
using CommCost = std::function<double(const std::string& op, double bytes, int group_size)>;

// Rank `rank` of a world of `size`. `charged` accumulates the modelled seconds of every
// transfer of this world and its splits (it must outlive them).
std::unique_ptr<Comm> NewEmulatedWorld(int rank, int size, CommCost cost, double* charged);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_EMULATED_COMM_H_
