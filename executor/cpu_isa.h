// The instruction set the cpu kernels' hot loops (cpu_kernels_isa.h) run with. The binary
// holds one copy of them per ISA — baseline x86-64 (SSE2), x86-64-v3 (AVX2, FMA) and
// x86-64-v4 (AVX-512 F/BW/DQ/VL); baseline only on other architectures — and picks one once,
// at first use: the best this CPU runs, or the one DITUNE_CPU_ISA names
// (baseline | v3 | v4). Thread-safe.
#ifndef DITUNE_EXECUTOR_CPU_ISA_H_
#define DITUNE_EXECUTOR_CPU_ISA_H_

#include <string_view>
#include <vector>

#include "core/status.h"
#include "executor/cpu_kernels_isa.h"

namespace ditune::exec {

enum class CpuIsa { kBaseline, kV3, kV4 };

// The environment variable that overrides the choice.
inline constexpr const char* kCpuIsaEnv = "DITUNE_CPU_ISA";

// "baseline", "v3" or "v4".
std::string_view CpuIsaName(CpuIsa isa);
// The ISAs this binary holds kernels for, baseline first.
std::vector<CpuIsa> CompiledCpuIsas();
// True iff this binary holds `isa`'s kernels and this CPU can run them.
bool CpuIsaUsable(CpuIsa isa);
// The usable ISAs, baseline first (baseline is always usable).
std::vector<CpuIsa> UsableCpuIsas();
// The best usable ISA.
CpuIsa BestCpuIsa();

// The choice for an override value (DITUNE_CPU_ISA's): null or empty gives BestCpuIsa(); a
// name gives that ISA when usable. InvalidArgument, naming the valid values and the ones
// this CPU runs, for an unknown name or an ISA this CPU (or binary) cannot run.
StatusOr<CpuIsa> ChooseCpuIsa(const char* value);

// The ISA in use: ChooseCpuIsa(getenv(DITUNE_CPU_ISA)) the first time, or what SetCpuIsa
// forced since. Returns the refusal while the variable holds a value that is refused (the
// CLI reports it at start-up; see CpuKernels for library callers).
StatusOr<CpuIsa> ActiveCpuIsa();
// Forces `isa` for every later kernel call (tests, benchmarks); InvalidArgument when it is
// not usable here.
Status SetCpuIsa(CpuIsa isa);

// The kernels of the ISA in use; while DITUNE_CPU_ISA holds a refused value (ActiveCpuIsa
// returns the refusal, which the caller reports), those of BestCpuIsa().
const CpuKernelTable& CpuKernels();
// The kernels of `isa`, which must be usable (CpuIsaUsable): another ISA's code would stop
// the process with an illegal instruction.
const CpuKernelTable& CpuKernelsFor(CpuIsa isa);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_CPU_ISA_H_
