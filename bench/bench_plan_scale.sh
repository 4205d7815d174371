#!/usr/bin/env bash
# Planning ditune's engine on thousands of GPUs: wall time and peak resident memory of
# `ditune plan --executor ditune` for every catalog model on N H100s (8 per node, InfiniBand),
# batch N (so data parallelism can use every GPU and the search is the widest), uncached, on
# one host thread and on all of them, interleaved so the two columns share the machine's noise.
#   bench/bench_plan_scale.sh [BUILD_DIR [GPUS [RUNS]]]
set -euo pipefail
build=${1:-build}
gpus=${2:-4096}
runs=${3:-3}
bin="$build/cli/ditune"
[[ -x $bin ]] || { echo "no $bin: build first" >&2; exit 2; }
data=${DITUNE_DATA:-$(dirname "$0")/../data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-22s %12s %12s %12s %12s %8s\n' model "1 thread s" "peak MB" "all s" "peak MB" configs
worst=0
for f in "$data"/models/*.json; do
  m=$(basename "$f" .json)
  declare -A t=() r=()
  for ((i = 0; i < runs; i++)); do
    for threads in 1 all; do
      env_threads=$([[ $threads == 1 ]] && echo 1 || nproc)
      DITUNE_THREADS=$env_threads /usr/bin/time -o "$tmp/t" -f "%e %M" "$bin" plan --model "$m" \
        --gpu h100-sxm5-80gb --gpus "$gpus" --nodes $((gpus / 8)) --inter ib-ndr --executor ditune \
        --batch "$gpus" --db "$tmp/p.db" --no-cache >"$tmp/out" 2>/dev/null || true
      out=$(tail -1 "$tmp/t")
      t[$threads]+="${out%% *} "
      r[$threads]+="${out##* } "
    done
  done
  configs=$(head -1 "$tmp/out" | sed -n 's/.*: \([0-9]*\) valid configurations.*/\1/p')
  t1=$(echo "${t[1]}" | median); ta=$(echo "${t[all]}" | median)
  r1=$(echo "${r[1]}" | median); ra=$(echo "${r[all]}" | median)
  awk -v m="$m" -v t1="$t1" -v r1="$r1" -v ta="$ta" -v ra="$ra" -v c="${configs:--}" \
    'BEGIN { printf "%-22s %12.2f %12.1f %12.2f %12.1f %8s\n", m, t1, r1 / 1024, ta, ra / 1024, c }'
  worst=$(awk -v a="$worst" -v b="$ta" 'BEGIN { print (b > a) ? b : a }')
done
echo "slowest on $(nproc) threads: $worst s (goal: under 2 s on $gpus GPUs)"
