#!/usr/bin/env bash
# The executor's commands under mpirun: run, calibrate compute and comm, autotune.
set -u
bin=${DITUNE_BIN:?}
mpi=${MPIEXEC:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DITUNE_DB=$tmp/exec.db
pass=0
fail=0
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (wanted $want), pattern /$pattern/"; echo "$out" | tail -15; fail=$((fail + 1)); return
  fi
  pass=$((pass + 1))
}
mpirun2=("$mpi" -np 2 --oversubscribe --allow-run-as-root)
mkdir -p "$tmp/dir"  # a folder where a store is expected
expect run-serial 0 "DiT \(device time, median of 2\)" -- "$bin" run --model tiny-pixart --steps 2 --iters 2 --config ""
expect run-ulysses 0 "ranks' medians: [0-9.]+, [0-9.]+ s" -- "${mpirun2[@]}" "$bin" run --model tiny-pixart --steps 2 --iters 2 --config ulysses=2
expect run-auto 0 "\(cpu kernels\): '[a-z0-9=,]+' on 2 ranks over mpi" -- "${mpirun2[@]}" "$bin" run --model tiny-sd3 --steps 2 --iters 1 --auto
expect run-wrong-size 2 "needs 4 ranks; 2 were launched|product-equals-gpus" -- "${mpirun2[@]}" "$bin" run \
  --model tiny-pixart --steps 2 --config ulysses=4
expect run-pipefusion-joint 0 "ranks' medians: [0-9.]+, [0-9.]+ s" -- "${mpirun2[@]}" "$bin" run --model tiny-sd3 --steps 3 --iters 1 \
  --config pipefusion=2,patches=2
expect run-pipefusion-ulysses 0 "ranks' medians: [0-9.]+, [0-9.]+, [0-9.]+, [0-9.]+ s" -- "$mpi" -np 4 --oversubscribe \
  --allow-run-as-root "$bin" run --model tiny-sd3 --steps 2 --iters 1 --config pipefusion=2,ulysses=2
expect run-distrifusion 0 "ranks' medians: [0-9.]+, [0-9.]+ s" -- "${mpirun2[@]}" "$bin" run --model tiny-flux --steps 3 --iters 1 \
  --config distrifusion=2
expect run-too-big 2 "needs about [0-9.]+ GB on the device" -- "$bin" run --model stepvideo-t2v --steps 1 --config ""
expect emulate-rank 0 "modelled compute of rank 3: .* on 4 x h100-sxm5-80gb" \
  -- "$bin" run --model tiny-pixart --steps 2 --iters 1 --config ulysses=2,cfg=2 --emulate-rank 3 --gpu h100-sxm5-80gb --gpus 4
expect emulate-bad-rank 2 "ranks 0 to 1" -- "$bin" run --model tiny-pixart --steps 2 --config ulysses=2 --emulate-rank 5
expect bad-comm-timeout 2 "DITUNE_COMM_TIMEOUT_S='soon': .* a number >= 0" -- env DITUNE_COMM_TIMEOUT_S=soon \
  "${mpirun2[@]}" "$bin" run --model tiny-pixart --steps 2 --config ulysses=2
expect comm-timeout-set 0 "ranks' medians: [0-9.]+, [0-9.]+ s" -- env DITUNE_COMM_TIMEOUT_S=30 "${mpirun2[@]}" "$bin" run --model tiny-pixart \
  --steps 2 --iters 1 --config ulysses=2
# The DiT engine across ranks (ref kernels, MPI staged through the host).
expect engine-ranks 0 "ranks' medians: [0-9.]+, [0-9.]+ s \(spread" -- "${mpirun2[@]}" "$bin" run \
  --backend ref --model tiny-sd3 --steps 2 --iters 2 --config ulysses=2
expect engine-ranks-trace 0 "kernel trace: .*/kt.rank0.json \(and one per rank beside it\)" -- "${mpirun2[@]}" "$bin" run \
  --backend ref --model tiny-sd3 --steps 2 --iters 1 --config ulysses=2 --trace "$tmp/kt.json"
for r in 0 1; do
  if python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['traceEvents']; sys.exit(not any(x.get('name')=='attention' and x.get('pid')==$r for x in e))" \
      "$tmp/kt.rank$r.json" 2>/dev/null; then
    pass=$((pass + 1))
  else
    echo "FAIL engine-ranks-trace: no attention slices of rank $r in $tmp/kt.rank$r.json"; fail=$((fail + 1))
  fi
done
expect engine-ranks-json 0 '"rank_median_s"' -- "${mpirun2[@]}" "$bin" run --backend ref --model tiny-flux --steps 2 \
  --iters 1 --config tp=2 --json
expect engine-ranks-nccl-ref 2 "--comm nccl moves GPU memory" -- "${mpirun2[@]}" "$bin" run --backend ref --comm nccl \
  --model tiny-sd3 --steps 2 --config ulysses=2
expect engine-ranks-bad-comm 2 "--comm 'gloo': valid: mpi, nccl" -- "${mpirun2[@]}" "$bin" run --backend ref \
  --comm gloo --model tiny-sd3 --steps 2 --config ulysses=2
expect engine-ranks-pipefusion 0 "'pipefusion=2' on 2 ranks over mpi" -- "${mpirun2[@]}" "$bin" run \
  --backend ref --model tiny-pixart --steps 3 --iters 1 --config pipefusion=2,patches=2,warmup=1
expect engine-ranks-pipefusion-joint 0 "'pipefusion=2,patches=4' on 2 ranks over mpi" -- "${mpirun2[@]}" "$bin" \
  run --backend ref --model tiny-flux --steps 3 --iters 1 --config pipefusion=2,patches=4
expect engine-ranks-pipefusion-ring 0 "'ring=2,pipefusion=2' on 4 ranks over mpi" -- "$mpi" -np 4 --oversubscribe \
  --allow-run-as-root "$bin" run --backend ref --model tiny-flux --steps 3 --iters 1 --config pipefusion=2,ring=2,warmup=1
expect engine-ranks-distrifusion 0 "'distrifusion=2' on 2 ranks over mpi" -- "${mpirun2[@]}" "$bin" \
  run --backend ref --model tiny-sd3 --steps 3 --iters 2 --config distrifusion=2
expect engine-ranks-wrong-size 2 "needs 4 ranks; 2 were launched" -- "${mpirun2[@]}" "$bin" run --backend ref \
  --model tiny-pixart --steps 2 --config ulysses=4
expect engine-ranks-too-big 2 "needs about [0-9.]+ GB on the device" -- "${mpirun2[@]}" "$bin" run --backend ref \
  --model stepvideo-t2v --steps 1 --config ulysses=2
expect calibrate-compute 0 "cpu/cpu/gemm" -- "$bin" calibrate compute --reps 2
expect calibrate-comm 0 "all_to_all +1024 " -- "${mpirun2[@]}" "$bin" calibrate comm --iters 3
expect calibrate-comm-one-rank 2 "needs at least 2 ranks" -- "$bin" calibrate comm
for iters in 0 -1 1000000000; do
  expect "calibrate-comm-iters$iters" 2 "--iters $iters: give 1 to 1000" -- "${mpirun2[@]}" "$bin" calibrate comm \
    --iters "$iters"
done
expect calibrate-comm-junk-link 2 "--link: unknown link 'junk'" -- "${mpirun2[@]}" "$bin" calibrate comm --link junk
expect calibrate-comm-host-as-gpu-link 2 "--link nvlink4: the mpi ranks move host memory" -- "${mpirun2[@]}" "$bin" \
  calibrate comm --link nvlink4 --iters 1
# The ranks of one run agree on it before the first transfer, or the job stops at once, named.
mpmd=("$mpi" --oversubscribe --allow-run-as-root -np 1)
expect run-ranks-disagree 2 "--height: rank 0 has '256', rank 1 '512'" -- timeout 120 "${mpmd[@]}" "$bin" run \
  --model tiny-pixart --steps 2 --height 256 --width 256 --config ulysses=2 : -np 1 "$bin" run --model tiny-pixart \
  --steps 2 --height 512 --width 256 --config ulysses=2
expect run-ranks-config-disagree 2 "configuration: rank 0 has 'ulysses=2', rank 1 'ring=2'" -- timeout 120 \
  "${mpmd[@]}" "$bin" run --model tiny-pixart --steps 2 --config ulysses=2 : -np 1 "$bin" run --model tiny-pixart \
  --steps 2 --config ring=2
expect run-rank-bad-store 2 "rank 1 of 2 refused its input, so the job stops: .*$tmp/dir" -- timeout 120 \
  "${mpmd[@]}" "$bin" run --model tiny-pixart --steps 2 --config ulysses=2 : -np 1 "$bin" run \
  --model tiny-pixart --steps 2 --config ulysses=2 --db "$tmp/dir"
expect autotune 0 "mean APE [0-9.]+% -> [0-9.]+%" -- "${mpirun2[@]}" "$bin" autotune --model tiny-pixart --steps 2 \
  --candidates 2 --iters 1
# ditune's engine autotuned across the ranks (its reference kernels, MPI through the host):
# refused until its kernels are calibrated, then predicted, run, recorded and refitted.
autotune_db=$tmp/autotune-engine.db
expect autotune-engine-uncalibrated 2 "ref kernels on this host are not calibrated" -- "${mpirun2[@]}" "$bin" \
  autotune --backend ref --model tiny-sd3 --steps 2 --candidates 2 --iters 1 --db "$autotune_db"
expect calibrate-ref 0 "cpu/ref/gemm" -- "$bin" calibrate compute --backend ref --reps 2 --db "$autotune_db"
expect autotune-engine 0 "refit: engine scale [0-9.]+ \(cpu/ref/engine@2\); mean APE [0-9.]+% -> [0-9.]+%" -- \
  "${mpirun2[@]}" "$bin" autotune --backend ref --model tiny-sd3 --steps 2 --candidates 2 --iters 1 --db "$autotune_db"
expect autotune-engine-recorded 0 "cpu/ref/engine@2 .*compute scale" -- "$bin" calibrate show --db "$autotune_db"
expect autotune-nccl-ref 2 "--comm nccl moves GPU memory: it needs --backend cuda" -- "${mpirun2[@]}" "$bin" \
  autotune --backend ref --comm nccl --model tiny-sd3 --steps 2
expect autotune-bad-backend 2 "--backend 'tpu': valid: cpu, cuda, ref" -- "${mpirun2[@]}" "$bin" autotune \
  --backend tpu --model tiny-sd3 --steps 2
expect runs-recorded 0 "measurements, .* active fits" -- "$bin" calibrate show
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
