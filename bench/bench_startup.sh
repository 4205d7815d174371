#!/usr/bin/env bash
# Start-up cost of whole ditune processes: wall time (median of N runs) and peak resident
# memory of commands that never touch a GPU, beside one that loads the GPU module
# (libditune_gpu.so: CUDA, cuBLASLt, NCCL), interleaved in one run so the ratios hold on a
# noisy machine.
#   bench/bench_startup.sh [BUILD_DIR [RUNS]]
set -euo pipefail
build=${1:-build}
runs=${2:-9}
bin="$build/cli/ditune"
[[ -x $bin ]] || { echo "no $bin: build first" >&2; exit 2; }
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
declare -A cmds=(
  [help]="--help"
  [models]="models"
  [plan-8]="plan --model flux.1-dev --height 2048 --width 2048 --gpu h100-sxm5-80gb --gpus 8 --db $db/p.db --no-cache"
  [plan-4096]="plan --model flux.1-dev --height 2048 --width 2048 --gpu h100-sxm5-80gb --gpus 4096 --inter ib-ndr --batch 512 --db $db/p.db --no-cache"
  [gpu-module]="run --model tiny-pixart --height 256 --width 256 --steps 1 --backend cuda --config="
)
order=(help models plan-8 plan-4096 gpu-module)
declare -A times rss
for ((i = 0; i < runs; i++)); do
  for name in "${order[@]}"; do
    # shellcheck disable=SC2086
    /usr/bin/time -o "$db/t" -f "%e %M" "$bin" ${cmds[$name]} >/dev/null 2>&1 || true
    out=$(tail -1 "$db/t")
    times[$name]+="${out%% *} "
    rss[$name]+="${out##* } "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(echo "${times[models]}" | median)
printf '%-11s %10s %10s %14s\n' command "median s" "peak MB" "x models"
for name in "${order[@]}"; do
  t=$(echo "${times[$name]}" | median)
  m=$(echo "${rss[$name]}" | median)
  awk -v n="$name" -v t="$t" -v m="$m" -v b="$base" 'BEGIN { printf "%-11s %10.3f %10.1f %14.2f\n", n, t, m / 1024, t / b }'
done
