#!/usr/bin/env bash
# Builds ditune if needed (installing what the build needs on a fresh machine) and runs
# every test under ctest, printing the output of any test that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --no-run
build=${DITUNE_BUILD_DIR:-build}
cmake --build "$build" -j "$(nproc)"  # the tests, benchmarks and fuzz targets setup leaves out
cd "$build"
# MPI tests run several ranks on few cores; let OpenMPI oversubscribe and run as root.
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --output-on-failure -j "$(nproc)" "$@"
