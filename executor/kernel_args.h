// The checks of a Kernels call's arguments that hold on every backend (kernels.h): sizes,
// leading dimensions and combinations the contract refuses. InvalidArgument naming the call
// and the values; Ok otherwise. Where the memory lies is each backend's own check.
#ifndef DITUNE_EXECUTOR_KERNEL_ARGS_H_
#define DITUNE_EXECUTOR_KERNEL_ARGS_H_

#include "core/status.h"
#include "executor/kernels.h"

namespace ditune::exec {

Status CheckGemmArgs(const GemmArgs& g);
Status CheckAttentionArgs(const AttentionArgs& a);
Status CheckMergeArgs(const AttentionMergeArgs& a);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_KERNEL_ARGS_H_
