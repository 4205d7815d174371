#include "executor/cpu_isa.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/enum_names.h"

namespace ditune::exec {
namespace {

#if defined(__x86_64__) && defined(DITUNE_HAVE_ISA_VARIANTS)
constexpr bool kVariants = true;
#else
constexpr bool kVariants = false;
#endif

bool CpuRuns(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kV3:
#if defined(__x86_64__)
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
      return false;
#endif
    case CpuIsa::kV4:
#if defined(__x86_64__)
      __builtin_cpu_init();
      return CpuRuns(CpuIsa::kV3) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#else
      return false;
#endif
  }
  return false;
}

std::string Names(const std::vector<CpuIsa>& isas) {
  std::string s;
  for (CpuIsa i : isas) s += (s.empty() ? "" : ", ") + std::string(CpuIsaName(i));
  return s;
}

// -1: not forced; otherwise the CpuIsa's value. `active` caches the table in use.
std::atomic<int> forced{-1};
std::atomic<const CpuKernelTable*> active{nullptr};

}  // namespace

constexpr EnumName<CpuIsa> kCpuIsaNames[] = {
    {CpuIsa::kBaseline, "baseline"},
    {CpuIsa::kV3, "v3"},
    {CpuIsa::kV4, "v4"},
};

std::string_view CpuIsaName(CpuIsa isa) { return NameIn(kCpuIsaNames, isa); }

std::vector<CpuIsa> CompiledCpuIsas() {
  if (!kVariants) return {CpuIsa::kBaseline};
  return {CpuIsa::kBaseline, CpuIsa::kV3, CpuIsa::kV4};
}

bool CpuIsaUsable(CpuIsa isa) {
  for (CpuIsa c : CompiledCpuIsas()) {
    if (c == isa) return CpuRuns(isa);
  }
  return false;
}

std::vector<CpuIsa> UsableCpuIsas() {
  std::vector<CpuIsa> out;
  for (CpuIsa c : CompiledCpuIsas()) {
    if (CpuRuns(c)) out.push_back(c);
  }
  return out;
}

CpuIsa BestCpuIsa() { return UsableCpuIsas().back(); }

StatusOr<CpuIsa> ChooseCpuIsa(const char* value) {
  if (value == nullptr || *value == '\0') return BestCpuIsa();
  const std::string v = value;
  for (CpuIsa c : {CpuIsa::kBaseline, CpuIsa::kV3, CpuIsa::kV4}) {
    if (v != CpuIsaName(c)) continue;
    if (CpuIsaUsable(c)) return c;
    return Status::InvalidArgument(fmt::format(
        "{}={}: {}; valid here: {}", kCpuIsaEnv, v,
        CpuRuns(c) ? "this binary holds no kernels for it" : "this CPU lacks its instructions",
        Names(UsableCpuIsas())));
  }
  return Status::InvalidArgument(
      fmt::format("{}='{}': valid values: baseline, v3, v4 (this CPU runs: {})", kCpuIsaEnv, v,
                  Names(UsableCpuIsas())));
}

StatusOr<CpuIsa> ActiveCpuIsa() {
  const int f = forced.load(std::memory_order_acquire);
  if (f >= 0) return static_cast<CpuIsa>(f);
  static const StatusOr<CpuIsa> from_env = ChooseCpuIsa(std::getenv(kCpuIsaEnv));
  return from_env;
}

Status SetCpuIsa(CpuIsa isa) {
  if (!CpuIsaUsable(isa)) {
    return Status::InvalidArgument(fmt::format("cpu isa {}: not usable here; usable: {}",
                                               CpuIsaName(isa), Names(UsableCpuIsas())));
  }
  forced.store(static_cast<int>(isa), std::memory_order_release);
  active.store(&CpuKernelsFor(isa), std::memory_order_release);
  return Status::Ok();
}

const CpuKernelTable& CpuKernelsFor(CpuIsa isa) {
#if defined(__x86_64__) && defined(DITUNE_HAVE_ISA_VARIANTS)
  if (isa == CpuIsa::kV4) return isa_v4::KernelTable();
  if (isa == CpuIsa::kV3) return isa_v3::KernelTable();
#else
  (void)isa;
#endif
  return isa_baseline::KernelTable();
}

const CpuKernelTable& CpuKernels() {
  if (const CpuKernelTable* t = active.load(std::memory_order_acquire)) return *t;
  // A refused DITUNE_CPU_ISA is the caller's to report (ActiveCpuIsa; the CLI refuses it at
  // start-up): the kernels themselves run the best ISA this CPU has.
  const StatusOr<CpuIsa> isa = ActiveCpuIsa();
  const CpuKernelTable* t = &CpuKernelsFor(isa.ok() ? *isa : BestCpuIsa());
  const CpuKernelTable* expected = nullptr;
  // A concurrent SetCpuIsa wins over the environment's choice.
  return active.compare_exchange_strong(expected, t, std::memory_order_acq_rel) ? *t : *expected;
}

}  // namespace ditune::exec
