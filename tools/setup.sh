#!/usr/bin/env bash
# Installs every Debian package ditune's build needs, configures (Ninja, Release), builds the
# ditune binary, and runs the main job on the embedded defaults. Idempotent; run as root on a fresh
# machine, or as a user with sudo.
#   tools/setup.sh            install, build, run the example plan
#   tools/setup.sh --no-run   install and build only
set -euo pipefail
cd "$(dirname "$0")/.."

run_example=1
[[ "${1:-}" == "--no-run" ]] && run_example=0

packages=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev libsqlite3-dev sqlite3 nlohmann-json3-dev libfmt-dev libcxxopts-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev
  python3
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${DITUNE_BUILD_DIR:-build}
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
# The binary, and the GPU module only where a GPU answers: tests, benchmarks and fuzz targets
# are tools/test.sh's to build.
targets=(ditune)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  known=$(cmake --build "$build" --target help)
  [[ $known == *$'\n'ditune_gpu:* ]] && targets+=(ditune_gpu)
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

if ((run_example)); then
  echo
  echo "== ditune plan: Flux.1-dev 1024x1024, 28 steps, on 8 H100s (the embedded catalogs) =="
  "$build/cli/ditune" plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --explain
fi
