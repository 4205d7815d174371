#!/usr/bin/env bash
# Small-message latency of ditune's MPI communicator beside plain blocking MPI: a ping-pong of
# 2 ranks at 8 B to 1 MB, every mode interleaved in one run so the ratios hold on a noisy
# machine (bench/bench_small_messages.cc says what each mode is), then what one poll costs.
#   bench/bench_small_messages.sh [BUILD_DIR [ROUNDS]]
#   SHARED_CORE=1 bench/bench_small_messages.sh ...  both ranks pinned to core 0, the modes
#                                                    that never yield left out
set -euo pipefail
build=${1:-build}
rounds=${2:-9}
bin="$build/bench/bench_small_messages"
[[ -x $bin ]] || { echo "no $bin: build first (it needs MPI)" >&2; exit 2; }
mpirun=${MPIEXEC:-mpirun}
if [[ ${SHARED_CORE:-0} == 1 ]]; then
  exec taskset -c 0 "$mpirun" -np 2 --bind-to none --allow-run-as-root "$bin" "$rounds" shared-core
fi
exec "$mpirun" -np 2 --allow-run-as-root "$bin" "$rounds"
