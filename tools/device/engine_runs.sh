#!/usr/bin/env bash
# On the GPU machine, after gpu_check.sh has built build-gpu: the single-GPU prediction check
# (tools/engine_prediction_check.sh cuda: calibrate compute on this GPU, run the engine on
# pixart-alpha and flux.1-dev 1024^2 and fit, then predict and run other catalog models and
# sizes), and Flux.1-dev 1024x1024, 28 steps (a calibration run) against xDiT's published
# single-H100 times, and the per-kernel profile of a Flux loop.
# Usage (device tool): bash tools/device/engine_runs.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/ditune-gpu}
mkdir -p "$out"
source tools/device/env.sh >/dev/null
bin=build-gpu/cli/ditune
[[ -x $bin ]] || { echo "build first: bash tools/device/gpu_check.sh"; exit 1; }
# Calibrate on pixart-alpha and flux.1-dev 1024^2, predict the other models and sizes.
DITUNE_BIN=$bin OUT=$out bash tools/engine_prediction_check.sh cuda | tee "$out/engine_runs.txt"
echo "xDiT, Flux.1-dev 1024x1024 28 steps on one H100 (published, end to end): 6.71 s eager, 4.30 s torch.compile"
echo "the engine runs the DiT only; the model's text encoding and VAE decode terms for the same run:"
DITUNE_DB=$out/prediction_check.db $bin simulate --model flux.1-dev --height 1024 --width 1024 --steps 28 --gpu h100-sxm5-80gb --gpus 1 --config "" | sed -n 2p
# Where the single-GPU predictions miss, kernel by kernel: one Flux.1-dev 1024^2 loop with every
# kernel timed, against each kernel's fitted curve.
echo "== kernel profile: flux.1-dev 1024x1024, 4 steps"
DITUNE_DB=$out/prediction_check.db $bin run --backend cuda --model flux.1-dev --height 1024 --width 1024 --steps 4 \
  --config "" --iters 1 --warmup 1 --profile | sed -n '/kernel profile/,/between kernels/p' | tee -a "$out/engine_runs.txt"
