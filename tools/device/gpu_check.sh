#!/usr/bin/env bash
# On the GPU machine: build ditune with CUDA for the GPU present, run the GPU tests (label
# gpu) and compute-sanitizer over the kernel tests once, and print a short table.
# Usage (device tool): bash tools/device/gpu_check.sh   (writes logs to $OUT when set)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/ditune-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" \
  -DDITUNE_GPU_TESTS=ON -DDITUNE_ENABLE_MPI=OFF >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target cuda_kernels_test bench_cuda >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
(cd build-gpu && ctest -L gpu --output-on-failure) 2>&1 | tee "$out/ctest.log" | tail -15
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck build-gpu/tests/cuda_kernels_test >"$out/sanitizer.log" 2>&1
  echo "compute-sanitizer memcheck: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$out/sanitizer.log") clean summaries)"
fi
build-gpu/bench/bench_cuda | tee "$out/bench_cuda.txt"
