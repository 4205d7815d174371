#!/usr/bin/env bash
# One tiny-pixart 512² denoising step (both CFG branches, one thread): ditune's engine on the
# cpu kernels (bench_cpu_kernels' DitStep, per ISA) against PyTorch + OpenBLAS running the same
# operations on the same shapes (bench/step_vs_torch.py), interleaved round by round so that
# both see the same host. Prints each round and the medians, and the ratio torch / ditune
# (> 1: ditune is faster) on CPU time (the figure to quote on a shared host) and wall time.
#
#   bench/bench_step_vs_torch.sh BUILD_DIR [ROUNDS=5] [ISAS="baseline v4"]
#
# The peer (not part of the build; tools/setup.sh does not install it), on Debian 12:
#   apt-get install -y python3-torch libopenblas0-openmp
#   update-alternatives --set libblas.so.3-x86_64-linux-gnu \
#       /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3   # if not already chosen
# Debian's torch calls whatever libblas.so.3 the alternatives name; the reference BLAS (the
# default without OpenBLAS) is not a fair peer, so the script refuses to run on it. Both
# sides get one thread and the same allocator setting: ditune's TuneAllocator keeps freed
# blocks in the heap (mallopt); the same glibc tunables are given to Python, without which
# every 16 MB attention tensor in torch would be mapped and page-faulted afresh.
set -euo pipefail
build=${1:?usage: bench_step_vs_torch.sh BUILD_DIR [ROUNDS] [ISAS]}
rounds=${2:-5}
isas=${3:-baseline v4}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3  # Debian's python3-torch lives in the system interpreter
bench="$build/bench/bench_cpu_kernels"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=536870912

[[ -x $bench ]] || { echo "no $bench: build the bench_cpu_kernels target" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "no torch in $py: apt-get install -y python3-torch libopenblas0-openmp" >&2; exit 2; }

echo "== peer: torch config (stderr of the first run) and BLAS loaded"
first=$("$py" "$here/step_vs_torch.py" --steps 3 --show-config)
echo "$first"
if ! grep -q openblas <<<"$first"; then
  echo "the peer did not load OpenBLAS (see 'blas' above): install libopenblas0-openmp and select it" >&2
  exit 2
fi

field() { "$py" -c "import json,sys; print(json.loads(sys.stdin.read())$1)"; }
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for r in $(seq 1 "$rounds"); do
  for isa in $isas; do
    j=$("$bench" --benchmark_filter="^DitStep/$isa/" --benchmark_min_time=2 --benchmark_format=json 2>/dev/null)
    cpu=$(field "['benchmarks'][0]['cpu_time']/1e3" <<<"$j")
    wall=$(field "['benchmarks'][0]['real_time']/1e3" <<<"$j")
    echo "round $r ditune/$isa cpu_s=$cpu wall_s=$wall" | tee -a "$results"
  done
  j=$("$py" "$here/step_vs_torch.py" --steps 20)
  echo "round $r torch cpu_s=$(field "['step_cpu_median_s']" <<<"$j") wall_s=$(field "['step_median_s']" <<<"$j")" |
    tee -a "$results"
done

echo "== medians over $rounds rounds (seconds per step) and torch / ditune"
"$py" - "$results" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (\S+) cpu_s=(\S+) wall_s=(\S+)", line)
    rows.setdefault(m[1], []).append((float(m[2]), float(m[3])))
med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in rows.items()}
torch = med.pop("torch")
print(f"{'side':<18}{'cpu_s':>10}{'wall_s':>10}{'torch/ditune cpu':>18}{'wall':>8}")
print(f"{'torch+openblas':<18}{torch[0]:>10.4f}{torch[1]:>10.4f}")
for k, (c, w) in med.items():
    print(f"{k:<18}{c:>10.4f}{w:>10.4f}{torch[0] / c:>18.2f}{torch[1] / w:>8.2f}")
PY
