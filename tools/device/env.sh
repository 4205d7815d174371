# Sourced by the device scripts on the GPU machine: where the build finds what the image lacks.
# - .devdeps/ (tools/device/pack_deps.sh, carried with the call): Eigen, fmt, SQLite, JSON,
#   cxxopts, GoogleTest, Google Benchmark, searched before the image's own.
# - NCCL: /usr/local/cuda or the system when there, else Python's nvidia-nccl wheel.
# Sets ditune_cmake_args (extra configure arguments) and prints one line on the machine.
ditune_cmake_args=()
if [[ -d .devdeps/usr ]]; then
  export CMAKE_PREFIX_PATH="$PWD/.devdeps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
ditune_nccl=none
for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do [[ -f $h ]] && ditune_nccl=$h && break; done
if [[ $ditune_nccl == none ]]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  nccl_lib=$(ls "$nccl_dir"/lib/libnccl.so* 2>/dev/null | head -1)
  if [[ -n $nccl_dir && -f $nccl_dir/include/nccl.h && -n $nccl_lib ]]; then
    ditune_cmake_args+=(-DNCCL_INCLUDE_DIR="$nccl_dir/include" -DNCCL_LIBRARY="$nccl_lib")
    export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    ditune_nccl=$nccl_lib
  fi
fi
echo "machine: $( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null); $(g++ --version 2>/dev/null | head -1);" \
  "$(nvcc --version 2>/dev/null | tail -1); cmake $(cmake --version 2>/dev/null | head -1 | awk '{print $3}');" \
  "mpirun: $(command -v mpirun || echo none); NCCL: $ditune_nccl; .devdeps: $([[ -d .devdeps ]] && echo yes || echo no)"
