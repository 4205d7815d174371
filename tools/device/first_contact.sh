#!/usr/bin/env bash
# On the GPU machine, first thing (issue #38): one script, under 8 minutes, that never stops at
# a failure and writes a summary table to $OUT. Nothing is compiled there: the binaries come
# prebuilt in .device/ (bash tools/device/prebuild.sh here; carry [".device"]). In order of value:
#   gpu          nvidia-smi: the GPU, its memory and driver, the catalog id it maps to
#   gpu_tests    every GPU test (each kernel against the ref kernels, flash attention for head
#                dims 64/72/88/128 with tails, the one-GPU engine forward against ref)
#   memcheck     compute-sanitizer --tool memcheck on a short subset
#   kernels      ditune's GEMM and attention beside torch.matmul and flash SDPA, same shapes
#   flux_engine  the engine on Flux.1-dev 1024², 28 steps, one GPU: DiT seconds against the
#                prediction `plan --executor ditune` made first, and xDiT's published figures
#   calibrate    calibrate compute --backend cuda, then the prediction made again from it
#   emulate      --emulate-rank of two multi-GPU plans (a rank's compute measured on one GPU)
#   host_ops     bench/diffusers_host_ops.py: diffusers' own blocks of the catalog models, their ATen
#                ops, kernels and host time per forward where the host bounds it (.devsrc:
#                tools/device/pack_diffusers.sh here, carry [".device", ".devsrc"])
#   torch_ops    bench/torch_ops_profile.py: the eager runtime's ops per catalog model, eager and
#                compiled, as a CSV `calibrate ingest` reads (checked by ingesting it)
#   prediction   tools/engine_prediction_check.sh cuda with what time is left
# $OUT gets summary.md (the table), first_contact.log (every step's output), kernels.csv,
# torch_ops.csv, host_ops.csv, prediction.txt: six files, under the eight a call returns.
#
#   bash tools/device/first_contact.sh             on the GPU machine (device tool: timeout_s 540)
#   bash tools/device/first_contact.sh --dry-run   anywhere: the CPU backends, a recorded
#       nvidia-smi, the build's own binaries (DITUNE_BIN's folder or build/), Python without
#       torch; every step's logic runs, so the script cannot fail on the GPU machine for its own
#       sake (ctest runs this).
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
dry=0
[[ ${1:-} == --dry-run ]] && dry=1
[[ $# -gt $dry ]] && { echo "usage: tools/device/first_contact.sh [--dry-run]" >&2; exit 2; }
out=${OUT:-/tmp/ditune-first-contact}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
log=$out/first_contact.log
summary=$out/summary.md
: >"$log"
budget_s=${FC_BUDGET_S:-470}  # the whole script, under the device call's 540 s
t_start=$(date +%s)
export DITUNE_DATA=$repo/data
export DITUNE_DB=$work/first_contact.db

if ((dry)); then
  bin=${DITUNE_BIN:-$repo/build/cli/ditune}
  build=$(cd "$(dirname "$bin")/.." && pwd)
  kernels_test=$build/tests/cuda_kernels_test
  bench=$build/bench/bench_cuda
  backend=cpu
  smi() { cat "$repo/tools/device/recorded/nvidia-smi-query-h100.csv"; }
else
  bin=$repo/.device/bin/ditune
  kernels_test=$repo/.device/bin/cuda_kernels_test
  bench=$repo/.device/bin/bench_cuda
  backend=cuda
  smi() { nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader; }
  source "$repo/tools/device/gpu_libs.sh"
  device_libs "$repo" "$work" "$log"
  [[ -x $bin ]] || echo "first_contact: no $bin — run tools/device/prebuild.sh here first and carry .device" | tee -a "$log"
fi

# One row per step: name, result, seconds, what it showed.
rows=()
note() { echo "$*" >"$work/note"; }
step() {
  local name=$1 limit=$2 left
  shift 2
  left=$((budget_s - ($(date +%s) - t_start)))
  if ((left < 10)); then
    rows+=("| $name | skipped | 0 | out of time (budget ${budget_s} s) |")
    return
  fi
  ((limit > left)) && limit=$left
  echo "== $name (limit ${limit} s)" >>"$log"
  : >"$work/note"
  local t0 rc result
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  case $rc in
    0) result=ok ;;
    124 | 137) result="TIMEOUT" ;;
    *) result="FAILED ($rc)" ;;
  esac
  rows+=("| $name | $result | $(($(date +%s) - t0)) | $(tr '\n' ' ' <"$work/note" | sed 's/|/\//g') |")
}
export -f note
export work bin kernels_test bench backend dry repo out

gpu_step() {
  smi >"$work/smi.csv" || return 1
  cat "$work/smi.csv"
  IFS=, read -r name memory driver cc <"$work/smi.csv"
  name=$(echo "$name" | xargs)
  case $name in
    *H200*) id=h200-sxm-141gb ;;
    *H100*PCIe*) id=h100-pcie-80gb ;;
    *H100*) id=h100-sxm5-80gb ;;
    *A100*80GB*) id=a100-sxm4-80gb ;;
    *) id=unknown ;;
  esac
  echo "$id" >"$work/gpu_id"
  ((dry)) || nvidia-smi
  note "$name,$memory, driver$driver, compute capability$cc → catalog $id$( ((dry)) && echo ' (recorded output)')"
  [[ $id != unknown ]]
}
gpu_tests_step() {
  [[ -x $kernels_test ]] || { note "no $kernels_test (CUDA did not compile here)"; ((dry)) && return 0 || return 1; }
  if ((dry)); then
    n=$("$kernels_test" --gtest_list_tests | grep -c '^  ')
    note "$n GPU tests listed (not run: no GPU)"
    return 0
  fi
  "$kernels_test" --gtest_brief=1 | tee "$work/tests.txt"
  rc=${PIPESTATUS[0]}
  failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$work/tests.txt" | awk '{print $4}' | sort -u)
  note "$(grep -oE '^\[  PASSED  \] [0-9]+ tests?' "$work/tests.txt" | sed 's/.*\] /passed /'); failed $(echo -n "$failed" | grep -c .)$(
    [[ -n $failed ]] && echo ": $(echo "$failed" | head -4 | tr '\n' ' ')")"
  return "$rc"
}
memcheck_step() {
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if ((dry)) || [[ ! -x $cs ]]; then
    note "skipped: no compute-sanitizer$( ((dry)) && echo ' (dry run)')"
    return 0
  fi
  "$cs" --tool memcheck "$kernels_test" \
    --gtest_filter='CudaKernels*:FlashAttentionTest.MatchesCpuForEveryHeadDimAndTail:CudaEngineTest.OneGpu*' >"$work/memcheck.txt" 2>&1
  rc=$?
  tail -5 "$work/memcheck.txt"
  note "$(grep -E 'ERROR SUMMARY' "$work/memcheck.txt" | tail -1) (exit $rc)"
  return "$rc"
}
kernels_step() {
  if ((dry)); then
    [[ -x $bench ]] || { note "no $bench (CUDA did not compile here)"; return 0; }
    "$bench" --shapes >"$work/kernels_in.csv" || return 1
    python3 "$repo/bench/torch_kernels.py" "$work/kernels_in.csv" --out "$out/kernels.csv" --dry-run | tee "$work/tk.txt"
  else
    "$bench" --csv "$work/kernels_in.csv" || return 1
    python3 "$repo/bench/torch_kernels.py" "$work/kernels_in.csv" --out "$out/kernels.csv" | tee "$work/tk.txt"
  fi
  ((PIPESTATUS[0] == 0)) || return 1
  note "$(grep '^attention goal' "$work/tk.txt"); $(python3 - "$out/kernels.csv" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["ratio"] != "-"]
att = [float(r["ratio"]) for r in rows if r["kind"] == "flash" and r["head_dim"] == "128"]
gemm = [float(r["ratio"]) for r in rows if r["kind"] == "gemm"]
print(f"flash hd128 vs SDPA: {min(att):.2f}-{max(att):.2f}x; GEMM vs matmul: {min(gemm):.2f}-{max(gemm):.2f}x"
      if att and gemm else f"{len(rows)} ratios (none timed)")
EOF
)"
}
flux_engine_step() {
  gpu=$(cat "$work/gpu_id" 2>/dev/null || echo unknown)
  [[ $gpu == unknown ]] && gpu=h100-sxm5-80gb
  if ((dry)); then
    model=tiny-flux h=256 s=2 plan_gpu=cpu
  else
    model=flux.1-dev h=1024 s=28 plan_gpu=$gpu
  fi
  "$bin" plan --executor ditune --model $model --height $h --width $h --steps $s --gpu $plan_gpu --gpus 1 --json \
    --no-cache >"$work/plan.json" || return 1
  predicted=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["ranked"][0]["dit_s"])' "$work/plan.json")
  "$bin" run --backend $backend --model $model --height $h --width $h --steps $s --config "" --iters 2 --warmup 1 \
    --json >"$work/run.json" || return 1
  measured=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["measured_s"])' "$work/run.json")
  note "$model ${h}², $s steps: DiT ${measured} s measured, ${predicted} s predicted by plan --executor ditune beforehand" \
    "$( ((dry)) || echo '; xDiT published (one H100, end to end): 6.71 s eager, 4.30 s compiled; goal DiT <= 4.3 s')"
}
calibrate_step() {
  "$bin" calibrate compute --backend $backend --reps $( ((dry)) && echo 1 || echo 5) | tail -15 || return 1
  if ((dry)); then model=tiny-flux h=256 s=2; else model=flux.1-dev h=1024 s=28; fi
  "$bin" run --backend $backend --model $model --height $h --width $h --steps $s --config "" --iters 2 --warmup 1 \
    --json >"$work/run2.json" || return 1
  note "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("after calibrate compute: %s measured %.3f s, predicted %.3f s (%+.1f%%; goal within 10%%)" % (sys.argv[2], d["measured_s"], d["predicted_s"], 100 * (d["predicted_s"] / d["measured_s"] - 1)))' "$work/run2.json" "$model")"
}
emulate_step() {
  if ((dry)); then
    set -- "tiny-flux 256 2 ulysses=2 1 cpu 2" "tiny-pixart 256 2 pipefusion=2 1 cpu 2"
  else
    # The plans are priced for the GPU the first step found (an H100 where it found none known).
    gpu=$(cat "$work/gpu_id" 2>/dev/null || echo unknown)
    [[ $gpu == unknown ]] && gpu=h100-sxm5-80gb
    set -- "flux.1-dev 1024 4 ulysses=4 0 $gpu 4" "pixart-alpha 1024 4 pipefusion=2,ulysses=2 3 $gpu 4"
  fi
  local shown="" rc=0
  for c in "$@"; do
    read -r model h s config rank gpu gpus <<<"$c"
    if "$bin" run --backend $backend --model $model --height $h --width $h --steps $s --config "$config" \
      --emulate-rank $rank --gpu $gpu --gpus $gpus --iters 1 --warmup 1 --json >"$work/em.json"; then
      shown+="$model $config rank $rank: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f s measured, %.3f s predicted" % (d["measured_s"], d["predicted_s"]))' "$work/em.json"); "
    else
      shown+="$model $config rank $rank: FAILED; "
      rc=1
    fi
  done
  note "$shown"
  return $rc
}
torch_ops_step() {
  "$bin" models --json >"$work/models.json" || return 1
  gpu=$(cat "$work/gpu_id" 2>/dev/null || echo h100-sxm5-80gb)
  [[ $gpu == unknown ]] && gpu=h100-sxm5-80gb
  if ((dry)); then
    python3 "$repo/bench/torch_ops_profile.py" --models-json "$work/models.json" --list >/dev/null &&
      python3 "$repo/bench/torch_ops_profile.py" --models-json "$work/models.json" --gpu "$gpu" --out "$out/torch_ops.csv" \
        --dry-run --models tiny-flux,tiny-pixart,tiny-sd3,tiny-video --compile-models tiny-flux || return 1
  else
    python3 "$repo/bench/torch_ops_profile.py" --models-json "$work/models.json" --gpu "$gpu" --out "$out/torch_ops.csv" \
      --budget-s 120 --run-id "torch-ops-$(date -u +%Y%m%d)" || return 1
  fi
  "$bin" calibrate ingest "$out/torch_ops.csv" --db "$work/ops.db" | tail -2 || return 1
  note "$(($(wc -l <"$out/torch_ops.csv") - 1)) op timings in torch_ops.csv, ingested by calibrate ingest"
}
host_ops_step() {
  "$bin" models --json >"$work/models_h.json" || return 1
  local src="" source=diffusers
  if [[ -d $repo/.devsrc/diffusers ]]; then
    src=$repo/.devsrc
    source=$(cat "$repo/.devsrc/COMMIT" 2>/dev/null || echo diffusers)
  fi
  if ((dry)); then
    python3 "$repo/bench/diffusers_host_ops.py" --models-json "$work/models_h.json" --out "$out/host_ops.csv" \
      --dry-run | tail -1 || return 1
    note "$(($(wc -l <"$out/host_ops.csv") - 1)) blocks listed (dry run: nothing built or timed)"
    return 0
  fi
  [[ -n $src ]] || { note "no .devsrc/diffusers (tools/device/pack_diffusers.sh here, carry .devsrc)"; return 1; }
  PYTHONUNBUFFERED=1 python3 "$repo/bench/diffusers_host_ops.py" --diffusers "$src" --source "$source" \
    --models-json "$work/models_h.json" --out "$out/host_ops.csv" --budget-s 75 | tee "$work/ho.txt"
  ((PIPESTATUS[0] == 0)) || return 1
  note "$(grep '^tiny op' "$work/ho.txt"); $(tail -1 "$work/ho.txt")"
}
prediction_step() {
  if ((dry)); then
    note "skipped in the dry run (ctest runs tools/engine_prediction_check.sh ref on its own)"
    return 0
  fi
  DITUNE_BIN=$bin OUT=$work/prediction bash "$repo/tools/engine_prediction_check.sh" cuda | tee "$out/prediction.txt"
  rc=${PIPESTATUS[0]}
  note "$(grep -iE 'median|held-out' "$out/prediction.txt" | tail -2 | tr '\n' ' ')"
  return "$rc"
}
export -f smi gpu_step gpu_tests_step memcheck_step kernels_step flux_engine_step calibrate_step emulate_step \
  torch_ops_step host_ops_step prediction_step

step gpu 20 bash -o pipefail -c gpu_step
step gpu_tests 150 bash -o pipefail -c gpu_tests_step
step memcheck 90 bash -o pipefail -c memcheck_step
step kernels 75 bash -o pipefail -c kernels_step
step flux_engine 60 bash -o pipefail -c flux_engine_step
step calibrate 60 bash -o pipefail -c calibrate_step
step emulate 40 bash -o pipefail -c emulate_step
step host_ops 100 bash -o pipefail -c host_ops_step
step torch_ops 150 bash -o pipefail -c torch_ops_step
step prediction 600 bash -o pipefail -c prediction_step

{
  echo "# first contact: $(cat "$work/smi.csv" 2>/dev/null | head -1)$( ((dry)) && echo ' — DRY RUN (cpu backends, recorded nvidia-smi)')"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(($(date +%s) - t_start)) s"
  echo
  echo "| step | result | s | what it showed |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$summary"
cat "$summary"
# Exit 0 when every step ran without failing; the table says which did not.
! grep -qE '\| (FAILED|TIMEOUT)' "$summary"
