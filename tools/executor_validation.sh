#!/usr/bin/env bash
# Calibrates ditune's engine on this machine's cpu kernels (kernel sweep, 2-rank
# communication sweep, and the engine scale from one 1-device run: `calibrate fit`), then
# runs every 2-rank configuration of tiny-pixart at 512x512 and prints measured against
# predicted latency with the median APE; the 2-rank runs are predicted before any of them
# ran. Reproduces docs/VALIDATION.md's executor table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DITUNE_BIN:-build/cli/ditune}
export DITUNE_DB=${DITUNE_DB:-$(mktemp -d)/executor-validation.db}
mpi=(mpirun -np 2 --oversubscribe --allow-run-as-root)
workload=(--model tiny-pixart --height 512 --width 512 --steps 4)
"$bin" calibrate compute --reps 9 >/dev/null
"${mpi[@]}" "$bin" calibrate comm >/dev/null
echo "| configuration | ranks | measured s | predicted s | APE |"
echo "|---|---|---|---|---|"
apes=()
row() {
  local ranks=$1 config=$2 json
  if [[ $ranks -eq 1 ]]; then
    json=$("$bin" run "${workload[@]}" --iters 5 --config "$config" --json)
  else
    json=$("${mpi[@]}" "$bin" run "${workload[@]}" --iters 5 --config "$config" --json)
  fi
  read -r measured predicted ape < <(python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
print(j["measured_s"], j["predicted_s"], abs(j["predicted_s"] - j["measured_s"]) / j["measured_s"])' <<<"$json")
  printf '| %s | %s | %.4f | %.4f | %.1f%% |\n' "${config:-1 device}" "$ranks" "$measured" "$predicted" \
    "$(python3 -c "print(100 * $ape)")"
  if [[ $ranks -eq 2 ]]; then apes+=("$ape"); fi
}
row 1 ""
# The 1-device run above is recorded; its DiT time against the kernels' prices is the engine
# scale (host work between kernels, caches colder than in the sweep) every plan is priced with.
"$bin" calibrate fit >/dev/null
for c in ulysses=2 ring=2 cfg=2 tp=2 pipefusion=2 pipefusion=2,patches=4 pipefusion=2,patches=8; do row 2 "$c"; done
python3 -c "import statistics, sys; print(f'2-rank median APE: {100 * statistics.median(map(float, sys.argv[1:])):.1f}%')" "${apes[@]}"
