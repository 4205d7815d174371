# Sourced on the GPU machine by first_contact.sh and follow_up.sh: points the loader at the
# prebuilt .device/lib and at CUDA's libraries where the image keeps them (the toolkit, or the
# wheels PyTorch brings), and the engine at the prebuilt GPU module.
#   device_libs REPO SCRATCH LOG   SCRATCH: a folder for the carried libcudart's link
device_libs() {
  local repo=$1 scratch=$2 log=$3 libs=$1/.device/lib name found d roots
  for name in libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
    found=""
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
      [[ -e $d/$name ]] && found=$d && break
    done
    if [[ -z $found ]]; then
      roots=$(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null || true)
      [[ -n $roots ]] && found=$(dirname "$(find $roots -name "$name" 2>/dev/null | head -1)" 2>/dev/null)
      [[ $found == . ]] && found=""
    fi
    if [[ -n $found ]]; then
      [[ :$libs: == *":$found:"* ]] || libs=$libs:$found
    elif [[ $name == libcudart.so.13 && -e $repo/.device/lib/fallback-libcudart.so.13 ]]; then
      ln -sf "$repo/.device/lib/fallback-libcudart.so.13" "$scratch/libcudart.so.13" && libs=$libs:$scratch
    else
      echo "device_libs: $name found nowhere on this machine" | tee -a "$log"
    fi
  done
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export DITUNE_GPU_MODULE=$repo/.device/lib/libditune_gpu.so
}
