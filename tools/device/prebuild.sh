#!/usr/bin/env bash
# Here, before a GPU session: builds everything the GPU run needs, so nothing is compiled on
# the GPU machine, into one ignored folder that travels with the device call (carry: [".device"]):
#   .device/bin/  ditune, cuda_kernels_test (the GPU tests), bench_cuda
#   .device/lib/  libditune_gpu.so (sm_80 and sm_90 machine code) and every shared library
#                 the binaries need that is neither the C/C++ runtime nor CUDA's (fmt, SQLite,
#                 zlib, ...), so they start on an image that lacks them
#   .device/MANIFEST  commit, date, architectures, what each binary needs from the machine
# The GPU machine is expected to provide: glibc and libstdc++ (at least the versions named in
# MANIFEST), the driver, and CUDA 13's cuBLASLt and NCCL (PyTorch's wheels carry them);
# tools/device/first_contact.sh finds those. No MPI is assumed there: the build has none.
# Then it checks here that each binary resolves every library from .device/lib, the C/C++
# runtime or the CUDA set alone, and that the folder is under the 64 MiB a call carries.
#   bash tools/device/prebuild.sh            (about 25 min on 2 cores from nothing; incremental after)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-device
dest=.device
limit_mib=64
jobs=${DITUNE_JOBS:-$(nproc)}

mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDITUNE_ENABLE_MPI=OFF -DDITUNE_GPU_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="80;90" -DDITUNE_FUZZ=OFF >"$build/configure.log"
grep -q "ditune backends:.*cuda" "$build/configure.log" ||
  { echo "prebuild: CMake found no CUDA toolkit (see $build/configure.log); nothing to build for a GPU" >&2; exit 1; }
cmake --build "$build" -j "$jobs" --target ditune ditune_gpu cuda_kernels_test bench_cuda

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
cp "$build/cli/ditune" "$build/tests/cuda_kernels_test" "$build/bench/bench_cuda" "$dest/bin/"
cp "$build/executor/libditune_gpu.so" "$dest/lib/"
strip --strip-unneeded "$dest"/bin/* "$dest"/lib/libditune_gpu.so

# Libraries the GPU machine provides: the C/C++ runtime and CUDA's own. Everything else the
# binaries need is copied.
machine_re='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.so|^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn[a-z_]*|libnvrtc|libnvJitLink)\.so'
needed() { ldd "$1" | awk '/=>/ && $3 ~ /^\// {print $1, $3}'; }
for f in "$dest"/bin/* "$dest"/lib/libditune_gpu.so; do
  while read -r name path; do
    [[ $name =~ $machine_re ]] && continue
    [[ -e $dest/lib/$name ]] || cp -L "$path" "$dest/lib/$name"
  done < <(needed "$f")
done
# libcudart is small and CUDA 13's minor-version compatibility runs it on any 13.x driver:
# carried as a fallback for an image that keeps it nowhere first_contact.sh looks.
cudart=$(ldd "$dest/lib/libditune_gpu.so" | awk '$1 ~ /^libcudart\.so/ {print $3}')
[[ -n $cudart && -f $cudart ]] && cp -L "$cudart" "$dest/lib/fallback-$(basename "$cudart")"

# The check: with only .device/lib added, every library resolves to .device/lib, the C/C++
# runtime or the CUDA set; none is missing except what the CUDA set will bring there.
status=0
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+local changes')"
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(g++ --version | head -1)"
  echo "cuda architectures 80;90; nvcc $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
  echo "glibc needed (max) $(objdump -T "$dest"/bin/* "$dest"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)"
  echo "libstdc++ needed (max) $(objdump -T "$dest"/bin/* "$dest"/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -V | tail -1)"
} >"$dest/MANIFEST"
for f in "$dest"/bin/* "$dest"/lib/libditune_gpu.so; do
  from_machine=()
  while read -r line; do
    name=$(awk '{print $1}' <<<"$line")
    path=$(awk '{print $3}' <<<"$line")
    if [[ $line == *"not found"* ]]; then
      [[ $name =~ $machine_re ]] || { echo "prebuild: $(basename "$f") needs $name, found nowhere" >&2; status=1; }
      from_machine+=("$name")
    elif [[ $path == "$PWD/$dest/lib/"* ]]; then
      :
    elif [[ $name =~ $machine_re ]]; then
      from_machine+=("$name")
    elif [[ -n $path && $path == /* ]]; then
      echo "prebuild: $(basename "$f") resolves $name from $path, outside .device/lib" >&2
      status=1
    fi
  done < <(LD_LIBRARY_PATH="$PWD/$dest/lib" ldd "$f" | grep "=>")
  echo "$(basename "$f") needs from the machine: ${from_machine[*]}" >>"$dest/MANIFEST"
done
ls -l "$dest/bin" "$dest/lib" | awk 'NF > 5 {print $5, $NF}' >>"$dest/MANIFEST"
size_kib=$(du -sk "$dest" | awk '{print $1}')
echo "size ${size_kib} KiB (limit ${limit_mib} MiB with the working tree)" >>"$dest/MANIFEST"
if ((size_kib > limit_mib * 1024)); then
  echo "prebuild: $dest is ${size_kib} KiB, over the ${limit_mib} MiB a device call carries" >&2
  status=1
fi
# The binaries start: ditune answers, the GPU tests list themselves, bench_cuda prints its shapes.
LD_LIBRARY_PATH="$PWD/$dest/lib" DITUNE_GPU_MODULE="$PWD/$dest/lib/libditune_gpu.so" "$dest/bin/ditune" models >/dev/null ||
  { echo "prebuild: ditune does not start" >&2; status=1; }
LD_LIBRARY_PATH="$PWD/$dest/lib" "$dest/bin/cuda_kernels_test" --gtest_list_tests >/dev/null ||
  { echo "prebuild: cuda_kernels_test does not start" >&2; status=1; }
LD_LIBRARY_PATH="$PWD/$dest/lib" "$dest/bin/bench_cuda" --shapes >/dev/null ||
  { echo "prebuild: bench_cuda does not start" >&2; status=1; }
cat "$dest/MANIFEST"
((status == 0)) && echo "prebuild: $dest ready (carry it: [\".device\"]); then run tools/device/first_contact.sh there"
exit $status
