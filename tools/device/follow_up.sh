#!/usr/bin/env bash
# On the GPU machine, after first_contact.sh (same prebuilt .device/ and .devsrc/, nothing
# compiled there): a short second call for what the first left open —
#   tests     the GPU tests matching FU_TESTS (gtest filter), then compute-sanitizer memcheck
#             on them (exit 0 and "0 errors" both needed)
#   host_ops  bench/diffusers_host_ops.py over every block it knows, at the image token counts
#             FU_TOKENS (host time per forward should not move with them where the host bounds
#             it; the rows say)
#   step_ops  bench/diffusers_step_ops.py: the ATen ops of a whole transformer forward outside
#             its blocks and of one scheduler step, on diffusers' models
#   vae_memory  bench/diffusers_vae_memory.py: the GPU memory (weights, peak, working set) and
#             time of one VAE decode at each model's default resolution, untiled and tiled, on
#             diffusers' own VAE classes (checks costmodels/memory_model.cc VaeDecodeBytes);
#             budget 220 s, the rows past it "out of time"; then Flux.1-dev's decode untiled
#             at 2048² and 4096² (vae_memory_flux_large.csv, budget 40 s): whether its widest
#             stage holds three 256-channel maps (core/model_spec.h VaeDecodeMemory), which a
#             1-GPU 4096² run on a 48 GB card cannot hold beside the model
#   collective_host_ops  bench/collective_host_ops.py: the host µs of one NCCL collective call
#             and of the Ulysses wrapper around an all-to-all (a group of one GPU)
# $OUT gets follow_up.log, memcheck.txt, host_ops.csv, step_ops.csv, vae_memory.csv,
# vae_memory_flux_large.csv and collective_host_ops.csv. Under 9 minutes: device tool
# timeout_s 540 (the other steps take about 80 s; vae_memory at most 260: timeout 250, then
# SIGKILL 10 s later; the large Flux decodes at most 60).
#   FU_TESTS='CudaKernelsTest.Large*:CudaEngineTest.Catalog*' bash tools/device/follow_up.sh
#   bash tools/device/follow_up.sh --dry-run     here: the same steps with the build's binaries
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
dry=0
[[ ${1:-} == --dry-run ]] && dry=1
out=${OUT:-/tmp/ditune-follow-up}
mkdir -p "$out"
log=$out/follow_up.log
: >"$log"
tests=${FU_TESTS:-CudaKernelsTest.LargeTransfersGoThroughCountedScratch:CudaEngineTest.CatalogShapesEqualTheRefKernels}
tokens=${FU_TOKENS:-64,256}
export DITUNE_DATA=$repo/data
rc=0
if ((dry)); then
  bin=${DITUNE_BIN:-$repo/build/cli/ditune}
  kernels_test=$(cd "$(dirname "$bin")/.." && pwd)/tests/cuda_kernels_test
else
  bin=$repo/.device/bin/ditune
  kernels_test=$repo/.device/bin/cuda_kernels_test
  scratch=$(mktemp -d)
  source "$repo/tools/device/gpu_libs.sh"
  device_libs "$repo" "$scratch" "$log"
fi
echo "== tests: $tests" | tee -a "$log"
if ((dry)); then
  [[ -x $kernels_test ]] && "$kernels_test" --gtest_list_tests --gtest_filter="$tests" | tee -a "$log"
else
  timeout 150 "$kernels_test" --gtest_filter="$tests" 2>&1 | tee -a "$log" | grep -E '^\[ +(OK|FAILED|PASSED) +\]|Failure|Which is|actual'
  ((PIPESTATUS[0] == 0)) || rc=1
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # memcheck on the kernel test alone (the engine test's ref kernels run on the CPU for a minute)
  timeout 90 "$cs" --tool memcheck "$kernels_test" --gtest_filter="CudaKernelsTest.*" >"$out/memcheck.txt" 2>&1
  mc=$?
  echo "memcheck exit $mc: $(grep 'ERROR SUMMARY' "$out/memcheck.txt" | tail -1)" | tee -a "$log"
  ((mc == 0)) || rc=1
fi
echo "== host_ops at image tokens $tokens" | tee -a "$log"
"$bin" models --json >"$out/models.json" || rc=1
args=(--models-json "$out/models.json" --out "$out/host_ops.csv" --img-tokens "$tokens")
if ((dry)); then
  python3 "$repo/bench/diffusers_host_ops.py" "${args[@]}" --dry-run | tail -1 | tee -a "$log"
else
  PYTHONUNBUFFERED=1 timeout 200 python3 "$repo/bench/diffusers_host_ops.py" "${args[@]}" --diffusers "$repo/.devsrc" \
    --source "$(cat "$repo/.devsrc/COMMIT")" --budget-s 170 2>&1 | grep -v Warning | tee -a "$log" || rc=1
fi
echo "== step ops outside the blocks" | tee -a "$log"
if ((dry)); then
  python3 "$repo/bench/diffusers_step_ops.py" --models-json "$out/models.json" --out "$out/step_ops.csv" --dry-run |
    tail -1 | tee -a "$log"
else
  PYTHONUNBUFFERED=1 timeout 170 python3 "$repo/bench/diffusers_step_ops.py" --diffusers "$repo/.devsrc" \
    --source "$(cat "$repo/.devsrc/COMMIT")" --models-json "$out/models.json" --out "$out/step_ops.csv" \
    --budget-s 140 2>&1 | grep -v Warning | tee -a "$log" || rc=1
fi
echo "== VAE decode memory" | tee -a "$log"
if ((dry)); then
  python3 "$repo/bench/diffusers_vae_memory.py" --models-json "$out/models.json" --out "$out/vae_memory.csv" --dry-run |
    tail -1 | tee -a "$log"
  python3 "$repo/bench/diffusers_vae_memory.py" --models-json "$out/models.json" --models flux.1-dev \
    --sizes 2048x2048,4096x4096 --no-tiled --out "$out/vae_memory_flux_large.csv" --dry-run | tail -1 | tee -a "$log"
else
  # SIGTERM past the budget still leaves the CSV (the script writes every row as it goes)
  PYTHONUNBUFFERED=1 timeout -k 10 250 python3 "$repo/bench/diffusers_vae_memory.py" --diffusers "$repo/.devsrc" \
    --source "$(cat "$repo/.devsrc/COMMIT")" --models-json "$out/models.json" --out "$out/vae_memory.csv" \
    --budget-s 220 2>&1 | grep -v Warning | tee -a "$log" || rc=1
  PYTHONUNBUFFERED=1 timeout -k 10 50 python3 "$repo/bench/diffusers_vae_memory.py" --diffusers "$repo/.devsrc" \
    --source "$(cat "$repo/.devsrc/COMMIT")" --models-json "$out/models.json" --models flux.1-dev \
    --sizes 2048x2048,4096x4096 --no-tiled --out "$out/vae_memory_flux_large.csv" --budget-s 40 2>&1 |
    grep -v Warning | tee -a "$log" || rc=1
fi
rm -f "$out/models.json"
echo "== collective host ops" | tee -a "$log"
if ((dry)); then
  python3 "$repo/bench/collective_host_ops.py" --out "$out/collective_host_ops.csv" --dry-run | tail -1 | tee -a "$log"
else
  PYTHONUNBUFFERED=1 timeout 90 python3 "$repo/bench/collective_host_ops.py" --out "$out/collective_host_ops.csv" 2>&1 |
    grep -v Warning | tee -a "$log" || rc=1
fi
exit $rc
