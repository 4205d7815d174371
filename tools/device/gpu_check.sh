#!/usr/bin/env bash
# On the GPU machine: build ditune with CUDA for the GPU present, run the GPU tests (label
# gpu), compute-sanitizer (memcheck, racecheck on the flash attention) once, the kernel
# benchmark, and print a short table. Logs go to $OUT when set. The machine's image may lack
# the build's packages: pack them here first (bash tools/device/pack_deps.sh) and carry
# .devdeps with the call; env.sh finds them, and NCCL where the image keeps it.
# Usage (device tool, carry [".devdeps"]): bash tools/device/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/ditune-gpu}
mkdir -p "$out"
source tools/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" \
  -DDITUNE_GPU_TESTS=ON -DDITUNE_ENABLE_MPI=OFF "${ditune_cmake_args[@]}" >"$out/configure.log" 2>&1 ||
  { tail -20 "$out/configure.log"; exit 1; }
grep -E "ditune backends|GPU tests" "$out/configure.log"
cmake --build build-gpu -j "$(nproc)" --target cuda_kernels_test bench_cuda ditune >"$out/build.log" 2>&1 ||
  { grep -E "error" "$out/build.log" | head -20; tail -20 "$out/build.log"; exit 1; }
echo "== GPU tests"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 300) 2>&1 | tee "$out/ctest.log" | grep -E "tests passed|Failed|FAILED|\*\*\*" | head -30
if command -v compute-sanitizer >/dev/null || [[ -x /usr/local/cuda/bin/compute-sanitizer ]]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  echo "== compute-sanitizer"
  "$cs" --tool memcheck build-gpu/tests/cuda_kernels_test --gtest_filter='CudaKernels*:FlashAttentionTest.MatchesCpuForEveryHeadDimAndTail:CudaEngineTest.OneGpu*' \
    >"$out/memcheck.log" 2>&1
  echo "memcheck: exit $? — $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
  "$cs" --tool racecheck build-gpu/tests/cuda_kernels_test --gtest_filter='FlashAttentionTest.MatchesCpuForEveryHeadDimAndTail' \
    >"$out/racecheck.log" 2>&1
  echo "racecheck: exit $? — $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck.log" | tail -1)"
fi
echo "== kernel throughput"
build-gpu/bench/bench_cuda | tee "$out/bench_cuda.txt"
# The engine across ranks on the GPU: two, four and eight processes share it, MPI staging the
# transfers through the host; each rank's gathered output against the one-GPU run. Needs MPI
# on the machine (skipped otherwise); NCCL needs one GPU per rank.
if command -v mpirun >/dev/null; then
  echo "== engine across ranks (cuda kernels, MPI)"
  cmake -S . -B build-gpu-mpi -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" \
    -DDITUNE_GPU_TESTS=ON "${ditune_cmake_args[@]}" >"$out/configure-mpi.log" 2>&1 &&
    cmake --build build-gpu-mpi -j "$(nproc)" --target engine_mpi_test nccl_comm_test ditune >"$out/build-mpi.log" 2>&1 || {
      echo "MPI build failed (see build-mpi.log)"; tail -5 "$out/build-mpi.log"; }
  if [[ -x build-gpu-mpi/tests/nccl_comm_test ]]; then
    echo "== NCCL on one rank (bootstrap, every transfer, split, the watchdog)"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun -np 1 build-gpu-mpi/tests/nccl_comm_test \
      >"$out/nccl_one_rank.log" 2>&1
    echo "nccl one rank: exit $? — $(grep -E 'PASSED|FAILED|lone send' "$out/nccl_one_rank.log" | sort -u | tr '\n' ' ')"
  fi
  if [[ -x build-gpu-mpi/tests/engine_mpi_test ]]; then
    for np in 2 4 8; do
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DITUNE_ENGINE_KERNELS=cuda \
        mpirun -np $np --oversubscribe build-gpu-mpi/tests/engine_mpi_test --gtest_filter="Engine$np.*" \
        >"$out/engine_mpi_$np.log" 2>&1
      echo "$np ranks: exit $? — $(grep -E 'PASSED|FAILED' "$out/engine_mpi_$np.log" | sort -u | tr '\n' ' ')"
    done
  fi
  if [[ -x build-gpu-mpi/cli/ditune ]]; then
    echo "== autotune of the engine on 2 ranks sharing the GPU (MPI through the host)"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun -np 2 --oversubscribe \
      build-gpu-mpi/cli/ditune autotune --backend cuda --comm mpi --model tiny-flux --height 256 --width 256 \
      --steps 2 --candidates 3 --iters 2 --db "$out/autotune.db" >"$out/autotune.log" 2>&1
    echo "autotune: exit $? — $(grep -E '^refit|^fastest' "$out/autotune.log" | tr '\n' ' ')"
  fi
else
  echo "== engine across ranks: no mpirun on this machine, skipped"
fi
