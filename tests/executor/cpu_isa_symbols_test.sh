#!/usr/bin/env bash
# The per-ISA kernel objects keep to themselves (executor/cpu_kernels_isa.cc): every symbol
# one defines for the linker lies in its own namespaces, so the linker cannot hand one ISA's
# code to another's callers; and the baseline object holds no AVX (ymm/zmm) instruction.
# Usage: cpu_isa_symbols_test.sh ISA=OBJECT...   (e.g. baseline=/path/cpu_kernels_isa.cc.o)
set -euo pipefail
fail=0
for arg in "$@"; do
  isa=${arg%%=*}
  obj=${arg#*=}
  # Defined symbols other than local ones (nm lowercase t/d/b/r; W/V/u are the weak ones),
  # by mangled name: one that names this copy's namespace (isa_X, or Eigen renamed to
  # ditune_eigen_isa_X) in its own name or a template argument cannot collide with another's.
  leaked=$(nm --defined-only "$obj" | awk '$2 ~ /^[TDBRWVGSui]$/ { print $3 }' |
           grep -v -e "isa_${isa}" -e '^DW\.ref\.__gxx_personality_v0$' || true)
  if [[ -n "$leaked" ]]; then
    echo "FAIL: $isa object defines symbols outside its namespaces:" >&2
    echo "$leaked" | c++filt | head -20 >&2
    fail=1
  fi
  if [[ $isa == baseline ]] && objdump -d "$obj" | grep -qE '%[yz]mm'; then
    echo "FAIL: the baseline object holds AVX instructions:" >&2
    objdump -d "$obj" | grep -E '%[yz]mm' | head -5 >&2
    fail=1
  fi
  if [[ $isa == v3 ]] && objdump -d "$obj" | grep -q '%zmm'; then
    echo "FAIL: the v3 object holds AVX-512 instructions" >&2
    fail=1
  fi
  echo "$isa: $(nm --defined-only "$obj" | wc -l) symbols, $(objdump -d "$obj" | grep -cE '%zmm') zmm / $(objdump -d "$obj" | grep -cE '%ymm') ymm / $(objdump -d "$obj" | grep -c 'vfmadd') fma instructions"
done
exit $fail
