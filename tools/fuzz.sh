#!/usr/bin/env bash
# Fuzzes every input parser with libFuzzer for a bounded time: builds the fuzz targets with
# clang (coverage, AddressSanitizer, UndefinedBehaviorSanitizer) in their own build
# directory, writes a seed corpus from the shipped data and the test fixtures, replays the
# inputs of earlier findings (tests/fuzz/regressions/TARGET/), then runs each target for RUNS
# inputs from a fresh corpus with a fixed seed, so that a run is the same on every machine with
# the same compiler (CI finds what this finds), and at most SECONDS. Fails on any crash, leak,
# timeout or sanitizer report, leaving the input under BUILD/crashes/TARGET/ (copy it into
# tests/fuzz/regressions/TARGET/ with the fix).
#   tools/fuzz.sh [RUNS [SECONDS [SEED]]]   (default 100000 inputs, 60 s, seed 1 per target;
#                                            RUNS 0: until SECONDS, for longer searches)
set -euo pipefail
runs=${1:-100000}
seconds=${2:-60}
seed=${3:-1}
[[ $runs -eq 0 ]] && runs=-1
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DITUNE_FUZZ_BUILD_DIR:-$root/build/fuzz}
targets=(config measurement_csv nccl_tests xdit_log catalog_json suite torch_trace serving run_agreement machine)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is not installed (tools/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi
mkdir -p "$build"
if [[ ! -f "$build/build.ninja" ]]; then
  if ! CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDITUNE_FUZZ=ON -DDITUNE_ENABLE_CUDA=OFF -DDITUNE_ENABLE_MPI=OFF -DDITUNE_BUILD_TESTS=OFF \
    -DDITUNE_BUILD_BENCH=OFF >"$build/configure.log" 2>&1; then
    echo "fuzz: configuring the clang build failed:" >&2
    tail -30 "$build/configure.log" >&2
    rm -f "$build/build.ninja"
    exit 1
  fi
fi
if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}" >"$build/build.log" 2>&1; then
  echo "fuzz: building the fuzz targets failed:" >&2
  grep -E "error|Error" -A3 "$build/build.log" | head -40 >&2
  exit 1
fi

# The seed corpus: one directory per target, written afresh.
seeds=$build/seeds
rm -rf "$seeds"
rm -rf "$build/corpus" "$build/crashes"
for t in "${targets[@]}"; do mkdir -p "$seeds/$t" "$build/corpus/$t" "$build/crashes/$t"; done
i=0
for c in "" "ulysses=2,ring=2" "ulysses=4,pipefusion=2,patches=8,warmup=0,cfg=2,dp=1,tp=1" \
  "distrifusion=4" "order=tp-sp-cfg-dp-pp,pipefusion=2,cfg=2" "ulysses=4,fsdp=4" \
  "--ulysses_degree 2 --ring_degree 2 --use_cfg_parallel" \
  "--pipefusion_parallel_degree 2 --num_pipeline_patch 4 --warmup_steps=1 --fully_shard_degree 2"; do
  printf '%s' "$c" >"$seeds/config/$((i++))"
done
cat >"$seeds/measurement_csv/0" <<'CSV'
source,kind,op,backend,device,ranks,link,bytes,flops,median_s,p10_s,p90_s,samples,params,run_id
microbench,op,gemm,cuda,h100-sxm5-80gb,1,,1.5e8,2.6e10,0.00125,0.0011,0.0015,20,"{""m"": 4096}",r1
import,collective,all_to_all,nccl,h100-sxm5-80gb,8,nvlink4,1048576,0,2.1e-05,2e-05,2.3e-05,20,{},
CSV
printf 'source,kind,op,device,median_s\nimport,e2e,dit,h100-sxm5-80gb,4.2\n' >"$seeds/measurement_csv/1"
cp "$root/tests/data/all_reduce_perf.txt" "$seeds/nccl_tests/0"
cp "$root/tests/data/xdit_flux_4gpu.log" "$seeds/xdit_log/0"
i=1
for f in "$root"/tests/data/nccl/*.txt; do cp "$f" "$seeds/nccl_tests/$((i++))"; done
i=1
for f in "$root"/tests/data/xdit/*; do cp "$f" "$seeds/xdit_log/$((i++))"; done
i=0
for f in "$root"/tests/data/doctor/topo.* "$root"/tests/data/doctor/*.csv "$root"/tests/data/doctor/smi-q.* \
  "$root"/tests/data/doctor/env.*; do
  cp "$f" "$seeds/machine/$((i++))"
done
cp "$root/tests/data/trace/profile_trace_rank_0.json" "$seeds/torch_trace/0"
cp "$root/tests/data/trace/profile_trace_rank_1.json.gz" "$seeds/torch_trace/1"
i=0
for f in "$root"/data/models/*.json "$root"/data/hardware/gpus/*.json "$root"/data/hardware/links/*.json; do
  cp "$f" "$seeds/catalog_json/$((i++))"
done
cp "$root/data/validation/xdit-published-dev.csv" "$seeds/suite/0"
printf '{"workload": {"model": "flux.1-dev", "height": 1024, "width": 1024, "frames": 1, "batch": 1},
 "ranked": [{"config": "ulysses=4"}]}\n' >"$seeds/suite/1"
cp "$root/data/validation/questions.json" "$seeds/suite/2"
printf 'arrival_s,model,height,width,frames,steps\n0,flux.1-dev,1024,1024,1,28\n0.5,,2048,2048,,\n' >"$seeds/serving/0"
printf '2x(ulysses=2)+4x()' >"$seeds/serving/1"
printf '1024x1024:3,2048x2048x1@20:1' >"$seeds/serving/2"
printf 'K--model\tflux.1-dev\n--height\t1024\n\x1fK--model\tflux.1-dev\n--height\t512\n' >"$seeds/run_agreement/0"
printf 'K--config\tulysses=2\n\x1fE2\nthe calibration store is a directory\x1fK' >"$seeds/run_agreement/1"
printf '\x00\x00\x00\x0ashm' >"$seeds/run_agreement/2"
printf '\x00\x00\x00\x03nvlink4' >"$seeds/run_agreement/3"
printf '(--ulysses_degree 2 --ring_degree 2)+1x(pipefusion=2,patches=4)' >"$seeds/serving/3"

status=0
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  regressions=$root/tests/fuzz/regressions/$t
  if [[ -d "$regressions" ]] && compgen -G "$regressions/*" >/dev/null; then
    if ! "$bin" -runs=1 "$regressions"/* >"$build/crashes/$t/replay.log" 2>&1; then
      echo "fuzz: $t fails on an earlier finding (see $build/crashes/$t/replay.log)"
      status=1
      continue
    fi
  fi
  log=$build/crashes/$t/fuzz.log
  start=$SECONDS
  if "$bin" -seed="$seed" -runs="$runs" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" "$build/corpus/$t" "$seeds/$t" >"$log" 2>&1; then
    done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz: $t: $done_runs inputs in $((SECONDS - start)) s (seed $seed), no finding"
  else
    echo "fuzz: $t: FINDING (input under $build/crashes/$t/, log $log):"
    grep -E "ERROR|SUMMARY|runtime error|deadly signal" "$log" | head -5
    status=1
  fi
done
exit $status
