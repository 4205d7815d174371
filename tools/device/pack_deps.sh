#!/usr/bin/env bash
# Here, before a GPU session: packs the Debian packages ditune's build needs that the GPU
# machine's image may lack (it reaches no package registry) into .devdeps/, which travels with
# a device call (`carry: [".devdeps"]`). gpu_check.sh finds it and puts it first on CMake's and
# the loader's paths; what the image already has stays usable. The GPU machine's own CUDA, NCCL
# and MPI are used (an MPI runtime is not relocatable enough to carry).
# Usage: bash tools/device/pack_deps.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.devdeps
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx "/$dest/" "$exclude" 2>/dev/null || echo "/$dest/" >>"$exclude"
packages=(
  libeigen3-dev nlohmann-json3-dev libcxxopts-dev
  libfmt-dev libfmt9
  libsqlite3-dev libsqlite3-0
  libgtest-dev libgmock-dev
  libbenchmark-dev libbenchmark1debian
)
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get -o APT::Sandbox::User=root download "${packages[@]}" >/dev/null) || {
  echo "pack_deps: apt-get download failed (run apt-get update first)" >&2
  exit 1
}
rm -rf "$dest"
mkdir -p "$dest"
for d in "$debs"/*.deb; do dpkg -x "$d" "$dest"; done
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man" "$dest/usr/share/lintian" "$dest/usr/src"
echo "packed $(ls "$debs" | wc -l) packages into $dest ($(du -sh "$dest" | cut -f1)):"
ls "$debs" | sed 's/_.*//' | tr '\n' ' '
echo
