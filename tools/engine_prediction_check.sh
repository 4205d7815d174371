#!/usr/bin/env bash
# Calibrate on some runs, predict the others: the single-device prediction check of the DiT
# engine. In a fresh store it times the backend's kernels (calibrate compute), runs the
# engine on a calibration set (each run recorded, its kernels profiled and recorded per
# shape), fits (calibrate fit: per-kernel curves, the launch overhead and the engine scale per
# device and backend), then runs held-out models and sizes and prints measured against
# predicted DiT time.
#
#   tools/engine_prediction_check.sh ref    # on this host: the ref kernels, tiny models
#   tools/engine_prediction_check.sh cuda   # on a GPU: catalog models (tools/device/engine_runs.sh)
#
# DITUNE_BIN picks the binary (default build/cli/ditune), OUT the folder for the store and
# the logs (default a new temporary folder). Prints one row per run and a summary line:
#   summary: held_out=N median_abs_error=X% max_abs_error=Y% (calibrated on M runs)
set -uo pipefail
cd "$(dirname "$0")/.."
backend=${1:-}
bin=${DITUNE_BIN:-build/cli/ditune}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
export DITUNE_DB=$out/prediction_check.db
rm -f "$DITUNE_DB" "$DITUNE_DB-wal" "$DITUNE_DB-shm"
[[ -x $bin ]] || { echo "no binary at $bin (build first, or set DITUNE_BIN)"; exit 1; }

# model height width frames steps
case $backend in
  ref)
    calibrate=("tiny-pixart 256 256 1 4" "tiny-flux 384 384 1 4" "tiny-sd3 512 512 1 2")
    held_out=("tiny-sd3 256 256 1 4" "tiny-pixart 384 384 1 4" "tiny-pixart 512 512 1 2" "tiny-flux 256 256 1 4"
              "tiny-flux 512 512 1 2" "tiny-video 256 256 5 2" "tiny-sd3 384 384 1 4")
    iters=3
    ;;
  cuda)
    calibrate=("pixart-alpha 1024 1024 1 20" "flux.1-dev 1024 1024 1 28")
    held_out=("sd3-medium 1024 1024 1 28" "hunyuandit-v1.2 1024 1024 1 20" "pixart-sigma 2048 2048 1 10"
              "sd3.5-large 1024 1024 1 14" "flux.1-dev 2048 2048 1 8" "wan2.1-1.3b 480 832 33 8"
              "pixart-alpha 512 512 1 20" "cogvideox-2b 480 720 49 4")
    iters=2
    ;;
  *) echo "usage: tools/engine_prediction_check.sh ref|cuda"; exit 2 ;;
esac

echo "== calibrate compute --backend $backend (store: $DITUNE_DB)"
"$bin" calibrate compute --backend "$backend" --reps 5 >"$out/calibrate_compute.txt" 2>&1 ||
  { tail -20 "$out/calibrate_compute.txt"; exit 1; }
grep -E "^compute " "$out/calibrate_compute.txt"

# run ROLE MODEL H W F S: one engine run, one row; held-out rows go into $out/errors.txt.
run() {
  local role=$1 model=$2 h=$3 w=$4 f=$5 s=$6 j
  # Calibration runs are profiled too: their kernels, at the shapes real runs have, join the
  # sweep's in the kernel fits.
  local profile=()
  [[ $role == calibrate ]] && profile=(--profile)
  j=$("$bin" run --backend "$backend" --model "$model" --height "$h" --width "$w" --frames "$f" --steps "$s" \
      --config "" --iters "$iters" --warmup 1 --json "${profile[@]}" 2>"$out/run.err")
  if [[ -z $j ]]; then
    printf "%-10s %-16s %-12s %s\n" "$role" "$model" "${h}x${w}x${f}" "$(tail -1 "$out/run.err")"
    return
  fi
  python3 - "$role" "$model" "${h}x${w}x${f}" "$s" "$j" "$out/errors.txt" <<'PY'
import json, sys
role, model, size, steps, j, errors = sys.argv[1:7]
j = json.loads(j)
m, p = j["measured_s"], j.get("predicted_s")
err = f"{100 * (p / m - 1):+7.1f}%" if p else "      -"
print(f"{role:10s} {model:16s} {size:12s} {steps:>5s} {m:10.4f} {p or 0:10.4f} {err} {j['peak_bytes'] / 1e9:8.2f}")
if role == "held-out" and p:
    open(errors, "a").write(f"{abs(p / m - 1)}\n")
PY
}

printf "%-10s %-16s %-12s %5s %10s %10s %8s %8s\n" role model HxWxF steps measured predicted error peak_GB
for r in "${calibrate[@]}"; do run calibrate $r; done
echo "== calibrate fit: kernel curves with the calibration runs' kernels, the engine scale from their DiT times"
"$bin" calibrate fit 2>&1 | grep -E "engine|launch"
rm -f "$out/errors.txt"
for r in "${held_out[@]}"; do run held-out $r; done
# Exits 1 unless every held-out run ran and was predicted.
python3 - "$out/errors.txt" "${#calibrate[@]}" "${#held_out[@]}" <<'PY'
import statistics, sys
try:
    e = sorted(float(x) for x in open(sys.argv[1]))
except FileNotFoundError:
    e = []
if not e:
    print("summary: no held-out run was predicted")
    sys.exit(1)
print(f"summary: held_out={len(e)} median_abs_error={100 * statistics.median(e):.1f}% "
      f"max_abs_error={100 * e[-1]:.1f}% (calibrated on {sys.argv[2]} runs)")
if len(e) != int(sys.argv[3]):
    print(f"only {len(e)} of {sys.argv[3]} held-out runs ran and were predicted")
    sys.exit(1)
PY
