#!/usr/bin/env bash
# The ditune binary as a user meets it: outputs, exit statuses and messages.
# Needs DITUNE_BIN (the binary) and DITUNE_DATA (the catalog) in the environment.
set -u
bin=${DITUNE_BIN:?}
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DITUNE_DB=$tmp/default.db  # never the user's database

# expect NAME STATUS PATTERN -- ARGS...: runs ditune ARGS, checks the exit status and that
# stdout+stderr match the extended regex PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$bin" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL $name: exit $rc, wanted $want"; echo "$out" | head -20; fail=$((fail + 1)); return
  fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output does not match /$pattern/"; echo "$out" | head -20; fail=$((fail + 1)); return
  fi
  pass=$((pass + 1))
}

expect usage 2 "usage: ditune COMMAND" --
expect unknown-command 2 "unknown command 'plna'" -- plna
expect models 0 "flux.1-dev +19 joint \+ 38 single" -- models
expect models-json 0 '"id": "pixart-alpha"' -- models --json
# The blocks' eager host ops counted on their code travel with the model (docs/CALIBRATION.md).
expect models-json-host-ops 0 '"joint": 114' -- models --json
# What the VAE decode is priced with travels too: the default is diffusers' 2-D Decoder.
expect models-json-vae-decode 0 '"source": "default: diffusers. 2-D Decoder' -- models --json
expect hardware 0 "h100-sxm5-80gb +989" -- hardware
expect hardware-links 0 "pcie4 +intra +pcie-two-socket" -- hardware
expect hardware-pcie-switches 0 "pcie4 +intra +pcie-two-socket +32 +20 +22 +12 +2 +18" -- hardware
expect hardware-host-link 0 "l20-48gb +120 .* 48 +31.5 +pcie4" -- hardware
expect hardware-bad-flag 2 "Option .jsno. does not exist" -- hardware --jsno

# Commands that never touch a GPU never load the GPU libraries; the GPU backends load on use.
if LD_DEBUG=libs "$bin" models 2>&1 >/dev/null | grep -Eq "libcudart|libcublasLt|libnccl|libditune_gpu"; then
  echo "FAIL models-loads-no-gpu-library: ditune models loaded a GPU library"; fail=$((fail + 1))
else
  pass=$((pass + 1))
fi
expect gpu-module-loads 1 "no CUDA device is available|compute backend 'cuda' is not built" -- run --model tiny-pixart \
  --height 256 --width 256 --steps 1 --backend cuda --config=
DITUNE_GPU_MODULE=$tmp/nope.so expect gpu-module-missing 1 "GPU backend module libditune_gpu.so was not found \(tried: .*nope.so \(missing\)\)|compute backend 'cuda' is not built" -- \
  run --model tiny-pixart --height 256 --width 256 --steps 1 --backend cuda --config=

expect check-xdit-16 0 "sp +\( 2\) \[0,1\] \[2,3\]" -- check --model pixart-alpha --height 1024 --width 1024 \
  --gpu h100-sxm5-80gb --gpus 16 --inter ib-ndr --batch 2 --config "ulysses=2,pipefusion=2,cfg=2,dp=2"
expect check-dp-spans 0 "dp +\( 2\) \[0,8\] .*\(spans nodes\)" -- check --model pixart-alpha --height 1024 --width 1024 \
  --gpu h100-sxm5-80gb --gpus 16 --inter ib-ndr --batch 2 --config "ulysses=2,pipefusion=2,cfg=2,dp=2"
expect check-xdit-syntax 0 "config: ulysses=2,ring=2 — valid" -- check --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 4 --config "--ulysses_degree 2 --ring_degree 2"
expect check-json 0 '"xdit_flags": "--ulysses_degree 4' -- check --model flux.1-dev --gpu h100-sxm5-80gb --gpus 4 \
  --config ulysses=4 --json
expect check-single 0 "config: 1 device" -- check --model sd3-medium --gpu l40-48gb --gpus 1 --config ""

# Invalid configurations are explained, with the rule and the valid choices.
expect check-heads 2 "Ulysses degrees flux.1-dev allows on 8 GPUs: 1, 2, 4, 8" -- check --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 8 --config ulysses=5
expect check-cfg 2 "\[cfg-needs-guidance\].*nearest valid: ulysses=4" -- check --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 4 --config ulysses=2,cfg=2
expect check-product 2 "\[product-equals-gpus\]" -- check --model pixart-alpha --gpu l40-48gb --gpus 8 --config cfg=2
expect check-xdit-tp 2 "\[runtime-runs-method\] xDiT has no tensor parallelism for flux.1-dev \(xDiT README.md.*TP ❎.*nearest launchable: ulysses=8" -- \
  check --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --config tp=2,ulysses=4
expect check-ditune-tp 0 "config: ulysses=4,tp=2 — valid" -- check --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --config tp=2,ulysses=4 --executor ditune
expect check-latte-rows 2 "\[sequence-divisible-by-sp\].*30 patch rows" -- check --model latte-1 --height 480 \
  --width 720 --gpu l20-48gb --gpus 8 --config ring=8
expect check-stepvideo 0 "launch with xDiT: torchrun --nproc_per_node=8 run_parallel.py" -- check --model stepvideo-t2v \
  --gpu h20-96gb --gpus 8 --config ulysses=8
expect check-adjusted 0 "xDiT runs 'ulysses=4,pipefusion=2,patches=5' as 'ulysses=4,pipefusion=2,patches=4'" -- check \
  --model pixart-alpha --gpu h100-sxm5-80gb --gpus 8 --config ulysses=4,pipefusion=2,patches=5
expect check-overflow 2 "multiply to more than 1048576 devices" -- check --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 8 --config tp=65536,ulysses=65536
expect check-config-syntax 2 "unknown config key 'ulysess'" -- check --model pixart-alpha --gpu l40-48gb --gpus 2 \
  --config ulysess=2
expect check-no-config 2 "--config is required" -- check --model pixart-alpha --gpu l40-48gb --gpus 2

# Bad workload and cluster flags.
expect unknown-model 2 "unknown model 'flux-dev' \(did you mean 'flux.1-dev'\?\); valid:" -- check --model flux-dev \
  --gpu h100-sxm5-80gb --gpus 1 --config ""
expect unknown-gpu 2 "unknown GPU 'h900'.*short forms such as H100" -- check --model flux.1-dev --gpu h900 --gpus 1 --config ""
expect bad-height 2 "--height 1000 must be a positive multiple of 16" -- check --model flux.1-dev --height 1000 \
  --gpu h100-sxm5-80gb --gpus 1 --config ""
expect non-int-flag 2 "--gpus 'eight': not a valid value \(this flag takes a decimal number" -- check --model flux.1-dev --gpus eight --gpu h100-sxm5-80gb \
  --config ""
expect bad-output-type 2 "--output-type 'png' is not one of: latent, decoded" -- check --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 1 --config "" --output-type png
expect stray-arg 2 "unexpected argument 'extra'" -- check --model flux.1-dev --gpu h100-sxm5-80gb --gpus 1 \
  --config "" extra
expect multi-node-no-inter 2 "need an inter-node link" -- check --model flux.1-dev --gpu h100-sxm5-80gb --gpus 16 \
  --config ulysses=16

# A damaged catalog is a clear error, not a crash.
mkdir -p "$tmp/data"
cp -r "$DITUNE_DATA"/. "$tmp/data/"
echo '{"id": ' >"$tmp/data/models/flux.1-dev.json"
DITUNE_DATA=$tmp/data expect malformed-json 2 "flux.1-dev.json: malformed JSON" -- models

# Calibration: ingest real-format files, fit, show; bad files and databases are clear errors.
data=$(dirname "$0")/../data
db=$tmp/cal.db
expect ingest-nccl 0 "ingested 9 measurements" -- calibrate ingest "$data/all_reduce_perf.txt" --gpu h100-sxm5-80gb \
  --link nvlink4 --db "$db"
expect fit 0 "all_reduce/nvlink4@2x1 +9 " -- calibrate fit --db "$db"
expect show 0 "9 measurements, [0-9]+ active fits" -- calibrate show --db "$db"
expect show-json 0 '"key": "all_reduce/nvlink4@2x1"' -- calibrate show --db "$db" --json
expect calibrate-factory 0 "[0-9]+ factory fits of release [0-9a-f]{16} active" -- calibrate factory --db "$db"
expect calibrate-factory-kept 0 "9 measurements" -- calibrate show --db "$db"
expect calibrate-factory-bad-flag 2 "Option .dbb. does not exist" -- calibrate factory --dbb "$db"
expect ingest-xdit 0 "ingested 1 measurements" -- calibrate ingest "$data/xdit_flux_4gpu.log" --gpu h100-sxm5-80gb \
  --model flux.1-dev --config ulysses=4 --db "$db"
expect ingest-no-link 2 "--link" -- calibrate ingest "$data/all_reduce_perf.txt" --gpu h100-sxm5-80gb --db "$db"
expect ingest-unknown-link 2 "unknown link 'nvlnk4'" -- calibrate ingest "$data/all_reduce_perf.txt" \
  --gpu h100-sxm5-80gb --link nvlnk4 --db "$db"
sed 's/   187.78 /   18x.78 /' "$data/all_reduce_perf.txt" >"$tmp/all_reduce_perf.txt"
expect ingest-bad-line 2 "all_reduce_perf.txt:17:" -- calibrate ingest "$tmp/all_reduce_perf.txt" --gpu h100-sxm5-80gb \
  --link nvlink4 --db "$db"
# One multi-GPU run alone refines nothing (it may be the regression its user is reporting)
# until another agrees or the user accepts it.
expect ingest-lone-run 0 "ingested 1 measurements" -- calibrate ingest "$data/xdit_flux_4gpu.log" \
  --gpu h100-sxm5-80gb --model flux.1-dev --config ulysses=4 --db "$tmp/lone.db"
expect lone-run-held 0 "measurement 1 \(xDiT run\): held: .* no other run on h100-sxm5-80gb agrees.*calibrate accept 1" \
  -- calibrate fit --db "$tmp/lone.db"
expect accept-run 0 "measurement 1 accepted; refitted" -- calibrate accept 1 --db "$tmp/lone.db"
expect accept-unknown 2 "no measurement 99" -- calibrate accept 99 --db "$tmp/lone.db"
expect accept-no-id 2 "give the measurement's id" -- calibrate accept --db "$tmp/lone.db"
# Collectives far below their link's figure (NCCL's P2P off on an NVLink box: 2.3 GB/s bus
# bandwidth over nvlink4) are not stored unless the user says the machine is that slow.
printf 'source,kind,op,backend,device,ranks,link,bytes,flops,median_s,p10_s,p90_s,samples,params,run_id\n%s\n' \
  'microbench,collective,all_to_all,nccl,h100-sxm5-80gb,8,nvlink4,134217728,,0.05,,,20,,slow' >"$tmp/slow.csv"
expect ingest-slow-link 2 "all_to_all over nvlink4 \(8 ranks\): 2.3 GB/s.*NCCL_P2P_DISABLE=1" -- \
  calibrate ingest "$tmp/slow.csv" --db "$tmp/slow.db"
expect ingest-slow-link-accepted 0 "ingested 1 measurements" -- calibrate ingest "$tmp/slow.csv" --db "$tmp/slow.db" \
  --accept-slow
# Rows the fits or the catalog cannot take fail the whole file, before anything is stored.
printf 'source,kind,op,backend,device,ranks,link,bytes,flops,median_s,p10_s,p90_s,samples,params,run_id\n%s\n%s\n' \
  'microbench,collective,all_to_all,nccl,h100-sxm5-80gb,8,nvlink4,134217728,,0.00061,,,20,,x' \
  'microbench,collective,bogus_op,nccl,h100-sxm5-80gb,8,nvlink4,134217728,,0.00061,,,20,,x' >"$tmp/bad_op.csv"
expect ingest-unknown-op 2 "measurement 2 of 2 \(nothing was stored\): collective 'bogus_op' is not one of" -- \
  calibrate ingest "$tmp/bad_op.csv" --db "$db" --fit
sed 's/bogus_op/all_gather/; s/,h100-sxm5-80gb,8,nvlink4,134217728,,0.00061,,,20,,x$/,h100-sxm5-80gb,8,nvlnk,134217728,,0.00061,,,20,,x/' \
  "$tmp/bad_op.csv" >"$tmp/bad_link.csv"
expect ingest-unknown-link-row 2 "link 'nvlnk' is not a catalog link id" -- calibrate ingest "$tmp/bad_link.csv" --db "$db"
deep=$(printf '[%.0s' {1..40})1$(printf ']%.0s' {1..40})
printf 'source,kind,op,backend,device,ranks,link,bytes,flops,median_s,p10_s,p90_s,samples,params,run_id\n%s\n' \
  "microbench,collective,all_to_all,nccl,h100-sxm5-80gb,8,nvlink4,134217728,,0.00061,,,20,\"{\"\"a\"\": $deep}\",x" \
  >"$tmp/deep.csv"
expect ingest-deep-params 2 "deep.csv:2: column 'params': nests 41 levels deep; at most 16" -- \
  calibrate ingest "$tmp/deep.csv" --db "$db"
expect ingest-xdit-no-model 2 "an xDiT log needs the run's workload: give --model" -- \
  calibrate ingest "$data/xdit_flux_4gpu.log" --gpu h100-sxm5-80gb --db "$db"
expect ingest-xdit-bad-config 2 "cfg-needs-guidance" -- calibrate ingest "$data/xdit_flux_4gpu.log" \
  --gpu h100-sxm5-80gb --model flux.1-dev --config ulysses=2,cfg=2 --db "$db"
sed 's/memory: 35.71 GB/memory: 300.00 GB/' "$data/xdit_flux_4gpu.log" >"$tmp/xdit_300gb.log"
expect ingest-xdit-impossible-peak 2 "peak memory 300 GB is not possible on h100-sxm5-80gb" -- calibrate ingest \
  "$tmp/xdit_300gb.log" --gpu h100-sxm5-80gb --model flux.1-dev --config ulysses=4 --db "$db"
printf '%s\n%s\n' 'Running test for size 1000, no split batch, warmup_step 0, pp_degree 1, ulysses_degree 3, ring_degree 1, num_pipeline_patches 1' \
  'epoch time: 1.62 sec, parameter memory: 2.41 GB, memory: 5.88 GB' >"$tmp/announced.log"
expect ingest-announced-config 2 "measurement 1 of 1 \(nothing was stored\): --height 1000 must be a positive multiple of 16" \
  -- calibrate ingest "$tmp/announced.log" --gpu h100-sxm5-80gb --model pixart-alpha --db "$db"
expect ingest-memory-store 2 "--db :memory:: calibrate keeps what it measures" -- calibrate ingest \
  "$data/xdit_flux_4gpu.log" --gpu h100-sxm5-80gb --model flux.1-dev --config ulysses=4 --db :memory:
expect ingest-nothing-stored 0 "10 measurements" -- calibrate show --db "$db"
expect fit-after-refusals 0 "all_reduce/nvlink4@2x1 +9 " -- calibrate fit --db "$db"
# A read-only store (a shared calibration): reads serve, writes are refused by name, nothing changes.
DITUNE_DB_READ_ONLY=1 expect ro-show 0 "10 measurements" -- calibrate show --db "$db"
DITUNE_DB_READ_ONLY=1 expect ro-plan 0 "launch with xDiT" -- plan --model pixart-alpha --height 1024 --width 1024 \
  --gpu h100-sxm5-80gb --gpus 2 --db "$db"
DITUNE_DB_READ_ONLY=1 expect ro-fit 2 "is open read-only .*calibrating \(new fits\) writes into it" -- calibrate fit \
  --db "$db"
DITUNE_DB_READ_ONLY=1 expect ro-missing 2 "does not exist, and a read-only store is never created" -- calibrate show \
  --db "$tmp/never.db"
DITUNE_DB_READ_ONLY=maybe expect ro-bad-value 2 "DITUNE_DB_READ_ONLY='maybe': valid: 0, 1" -- calibrate show --db "$db"
expect ro-unchanged 0 "10 measurements" -- calibrate show --db "$db"
expect compute-zero-reps 2 "--reps 0: give 1 to 1000" -- calibrate compute --reps 0 --db "$db"
expect ingest-missing-file 2 "cannot open" -- calibrate ingest "$tmp/nope.txt" --db "$db"
printf 'this is not a database, just some text that is long enough to look like one' >"$tmp/bad.db"
expect damaged-db 2 "is damaged or not a ditune database" -- calibrate show --db "$tmp/bad.db"
expect ingest-terms 0 "e2e +h100-sxm5-80gb/flux.1-dev/vae_decode +2 " -- calibrate ingest "$data/pipeline_terms.csv" \
  --db "$db" --fit
expect terms-applied 0 "text encoding 45.0 ms .* VAE decode 1[0-9][0-9]\.[0-9] ms" -- simulate --model flux.1-dev --gpu h100-sxm5-80gb --gpus 1 \
  --config "" --db "$db"
# A profiler trace ingested with its workload: the GPU's efficiency per op class, shown where
# plan --explain says what priced the plan; a class far from its model is quarantined by name.
tdb=$tmp/trace.db
expect ingest-trace-classes 0 "kernel_class +h100-sxm5-80gb .*gemm 0.70x, attention 1.34x the modelled device time \(profiler trace" \
  -- calibrate ingest "$data/trace/profile_trace_1gpu.json" --gpu h100-sxm5-80gb --model pixart-alpha --height 256 \
  --width 256 --steps 1 --db "$tdb" --fit
expect trace-quarantine 0 "measurement 2 \(profiler trace\): elementwise kernels quarantined: 0.0724x" -- calibrate fit --db "$tdb"
expect trace-explain 0 "efficiency per op class of xDiT's kernels on h100-sxm5-80gb: gemm 0.70x, attention 1.34x.*profiler trace" \
  -- plan --model pixart-alpha --gpu h100-sxm5-80gb --gpus 2 --explain --db "$tdb"
{ printf '\xEF\xBB\xBF'; cat "$data/trace/profile_trace_1gpu.json"; } >"$tmp/bom_trace.json"
expect ingest-trace-bom 0 "ingested [0-9]+ measurements" -- calibrate ingest "$tmp/bom_trace.json" --gpu h100-sxm5-80gb \
  --model pixart-alpha --height 256 --width 256 --steps 1 --db "$tmp/bom.db"
head -c 300000000 /dev/zero | gzip -1 >"$tmp/bomb.json.gz"
expect ingest-gzip-bomb 2 "bomb.json.gz: gzip data decompresses to more than 256 MiB" -- calibrate ingest \
  "$tmp/bomb.json.gz" --gpu h100-sxm5-80gb --model pixart-alpha --db "$tmp/bomb.db"
sed 's/^     1048576 /     1.05e6  /' "$data/all_reduce_perf.txt" >"$tmp/all_reduce_perf_float.txt"
expect ingest-nccl-float-size 0 "all_reduce_perf_float.txt:15: size '1.05e6' is not a whole number of bytes; row dropped" -- \
  calibrate ingest "$tmp/all_reduce_perf_float.txt" --gpu h100-sxm5-80gb --link nvlink4 --db "$tmp/float.db"
printf 'source,kind,op,backend,device,ranks,link,bytes,flops,median_s,p10_s,p90_s,samples,params,run_id\n%s\n' \
  'microbench,op,gemm,cuda,h100-sxm5-80gb,1,,,1e12,0.0021,,,5,"{""m"":4096,""n"":4096,""k"":4096}",own' >"$tmp/one_op.csv"
expect ingest-run-id-conflict 2 "measurement 1 of 1 has run_id 'own' but --run-id is 'other'" -- calibrate ingest \
  "$tmp/one_op.csv" --run-id other --db "$tmp/one.db"
expect ingest-one-op 0 "ingested 1 measurements" -- calibrate ingest "$tmp/one_op.csv" --db "$tmp/one.db"
expect fit-one-op 2 "none of the 1 measurement\(s\) in .*one.db makes a fit" -- calibrate fit --db "$tmp/one.db"
expect calibrate-usage 2 "usage: ditune calibrate" -- calibrate
expect calibrate-unknown 2 "unknown subcommand 'fitt'" -- calibrate fitt

# Simulation and validation.
expect simulate 0 "latency [0-9.]+ s ±[0-9]+% = text encoding .* DiT .* VAE decode" -- simulate --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 4 --config ulysses=4
# A peak that fits by less than its 80% interval says so: Wan2.2 TI2V-5B on one 24 GB card
# (Wan2.2 #90 ran out of memory there, with 4 GiB fragmented).
expect simulate-memory-tight 0 "fits, tight: the 80% interval reaches [0-9.]+ GB" -- simulate --model wan2.2-ti2v-5b \
  --height 704 --width 1280 --frames 121 --gpu rtx4090-24gb --gpus 1 --runtime wan-generate --config offload=1,te=cpu
expect simulate-json 0 '"latency_s": [0-9.]+' -- simulate --model pixart-alpha --gpu l40-48gb --gpus 8 \
  --config cfg=2,pipefusion=4 --json
expect simulate-trace 0 "trace: $tmp/trace.json" -- simulate --model sd3-medium --steps 4 --gpu a100-sxm4-80gb \
  --gpus 2 --config pipefusion=2 --trace "$tmp/trace.json"
if python3 -c "import json,sys; t=json.load(open(sys.argv[1])); assert any(e.get('ph')=='X' for e in t['traceEvents'])" \
  "$tmp/trace.json"; then pass=$((pass + 1)); else echo "FAIL trace-json"; fail=$((fail + 1)); fi
# The names users type: the model as xDiT's --model and Hugging Face spell it, the GPU as
# people and nvidia-smi name it.
expect plan-user-model-and-gpu-names 0 "flux.1-dev 1024x1024, 28 steps, batch 1 on 8 x h100-sxm5-80gb" \
  -- plan --model FLUX.1-dev --gpu H100 --gpus 8
expect plan-short-gpu-says-which 0 "GPU 'H100' taken as h100-sxm5-80gb .*h100-pcie-80gb" \
  -- plan --model black-forest-labs/FLUX.1-dev --gpu H100 --gpus 8
expect plan-driver-gpu-name 0 "on 4 x h100-pcie-80gb" -- plan --model flux.1-dev --gpu "NVIDIA H100 PCIe" --gpus 4
expect plan-unknown-gpu-closest 2 "unknown GPU 'b100'.*b200" -- plan --model flux.1-dev --gpu B100 --gpus 8
expect plan-a800-cut-nvlink 0 "on 8 x a800-sxm4-80gb \(1 node\(s\), nvlink3-400\)" -- plan --model flux.1-dev --gpu A800 --gpus 8
expect plan-a100-short-80gb 0 "GPU 'A100' taken as a100-sxm4-80gb" -- plan --model flux.1-dev --gpu A100 --gpus 8
expect plan-unknown-model-closest 2 "flux\." -- plan --model flux.3 --gpu h100-sxm5-80gb --gpus 8
# simulate prices a configuration as plan does, for the same executor: the figures agree to the
# digit (the 24-GPU Flux winner, whose patch count xDiT recomputes, and ditune's engine).
for exec in xdit ditune; do
  args=(--model flux.1-dev --gpu h100-sxm5-80gb --gpus 24 --nodes 3 --inter ib-ndr --executor "$exec")
  "$bin" plan "${args[@]}" --no-cache --json >"$tmp/plan-$exec.json" 2>/dev/null
  best=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranked"][0]["config"])' "$tmp/plan-$exec.json")
  "$bin" simulate "${args[@]}" --config "$best" --json >"$tmp/sim-$exec.json" 2>/dev/null
  if python3 - "$tmp/plan-$exec.json" "$tmp/sim-$exec.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["ranked"][0]
s = json.load(open(sys.argv[2]))
for k in ("latency_s", "dit_s", "text_encode_s", "vae_decode_s"):
    assert p[k] == s[k], (k, p[k], s[k])
assert p["config"] == s["config"], (p["config"], s["config"])
PY
  then pass=$((pass + 1)); else echo "FAIL simulate-agrees-with-plan-$exec ($best)"; fail=$((fail + 1)); fi
done
# Every runtime that runs Qwen-Image: plan's winner, simulated for that runtime, has plan's figure.
for rt in xdit sglang vllm-omni diffusers trtllm-visualgen ditune; do
  args=(--model Qwen/Qwen-Image --height 1024 --width 1024 --gpu h200-sxm-141gb --gpus 2 --runtime "$rt")
  "$bin" plan "${args[@]}" --no-cache --json >"$tmp/plan-$rt.json" 2>/dev/null
  best=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranked"][0]["config"])' "$tmp/plan-$rt.json")
  "$bin" simulate "${args[@]}" --config "$best" --json >"$tmp/sim-$rt.json" 2>/dev/null
  if python3 - "$tmp/plan-$rt.json" "$tmp/sim-$rt.json" "$rt" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["ranked"][0]
s = json.load(open(sys.argv[2]))
assert p["latency_s"] == s["latency_s"], (p["latency_s"], s["latency_s"])
assert p["runtime"] == s["runtime"] == sys.argv[3], (p["runtime"], s["runtime"])
assert (p["launch"] is None) == (sys.argv[3] == "ditune")
if p["launch"] is not None:
    assert p["launch"]["command"] == s["launch"]["command"], (p["launch"], s["launch"])
PY
  then pass=$((pass + 1)); else echo "FAIL simulate-agrees-with-plan-runtime-$rt ($best)"; fail=$((fail + 1)); fi
done
expect plan-any-qwen-xdit-behind 0 "xdit: best ulysses=2 at [0-9.]+ s \(\+" \
  -- plan --model qwen-image --height 1024 --width 1024 --gpu h200-sxm-141gb --gpus 2 --runtime any --explain
expect plan-any-qwen-cfg 0 "cfg=2 on (sglang|vllm-omni|trtllm-visualgen) wins among the 6 runtimes that run qwen-image" \
  -- plan --model qwen-image --height 1024 --width 1024 --gpu h200-sxm-141gb --gpus 2 --runtime any --explain
expect plan-wan-generate-line 0 "torchrun --nproc_per_node=8 generate.py --task t2v-14B .*--size 1280\*720 .*--(ulysses|ring)_size [0-9] --(ulysses|ring)_size [0-9]" \
  -- plan --model wan2.1-14b --height 720 --width 1280 --gpu h100-sxm5-80gb --gpus 8 --runtime wan-generate
expect plan-runtime-not-for-model 2 "runtime 'wan-generate' runs no entry point for flux.1-dev; runtimes that run it: .*xdit" \
  -- plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --runtime wan-generate
expect simulate-runtime-any-refused 2 "--runtime any: this command prices one runtime's configuration" \
  -- simulate --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 --config ulysses=2 --runtime any
expect runtime-and-executor-disagree 2 "--runtime sglang and --executor xdit disagree" \
  -- plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 --runtime sglang --executor xdit
expect check-trtllm-yaml 0 "visual_gen.yaml beside it:.*|cfg_size: 2" \
  -- check --model qwen-image --height 1024 --width 1024 --gpu h200-sxm-141gb --gpus 2 --config cfg=2 \
  --runtime trtllm-visualgen
expect launch-diffusers-dry-run 0 "ulysses_size=(2|None), ring_size=(2|None), tp_size=(2|None)," \
  -- launch --auto --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 --runtime diffusers --dry-run
expect runtimes-list 0 "wan-generate +Wan generate.py +eager +6" -- runtimes
expect plan-methods-restrict 0 "^1 +(ulysses|ring)=[0-9]+(,ring=[0-9]+)? " -- plan --model pixart-alpha --height 2048 --width 2048 \
  --gpu l40-48gb --gpus 8 --methods ulysses,ring
expect plan-methods-bad 2 "--methods: 'pipe' is not a method; valid: ulysses, ring, pipefusion" -- plan --model pixart-alpha \
  --gpu l40-48gb --gpus 8 --methods ulysses,pipe
expect plan-stale-note 0 "note: PipeFusion and DistriFusion reuse one-step-stale activations" -- plan --model pixart-alpha \
  --height 2048 --width 2048 --gpu l40-48gb --gpus 8 --methods pipefusion,cfg --explain
# Published runs of other runtimes (the shared file, turned into suite rows by
# tools/validation/beyond_xdit_suite.py): every row is priced, Open-Sora's and the Z-Image
# ControlNet's included; Open-Sora's peaks (its checkpoint load on 2 to 8 GPUs) within 10%.
"$bin" validate --suite "$DITUNE_DATA/validation/published-beyond-xdit.csv" --db "$tmp/beyond.db" --json \
  >"$tmp/beyond.json" 2>/dev/null
if python3 - "$tmp/beyond.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    assert not r.get("refused", ""), (r["line"], r.get("refused"))
assert d["summary"]["rows"] >= 50, d["summary"]
runtimes = {r["runtime"] for r in d["rows"] if not r.get("refused")}
assert {"wan-generate", "diffusers", "vllm-omni", "open-sora"} <= runtimes, runtimes
for r in d["rows"]:
    if r["group"].startswith("os2") and r["gpus"] > 1 and r["memory_phase"] == "loading the checkpoint":
        assert r["memory_ape"] <= 0.10, r
PY
then pass=$((pass + 1)); else echo "FAIL validate-beyond-xdit-prices-every-catalog-row"; fail=$((fail + 1)); fi
# Published peaks per GPU (the memory model by phase): Wan2.1's table (in the file above) and
# Wan2.2's (data/validation/wan22-published.csv, never used to shape the model) within 10%
# median; every multi-GPU Wan2.2 peak at rank 0's VAE decode within 10%.
"$bin" validate --suite "$DITUNE_DATA/validation/wan22-published.csv" --db "$tmp/wan22.db" --json \
  >"$tmp/wan22.json" 2>/dev/null
if python3 - "$tmp/beyond.json" "$tmp/wan22.json" <<'PY'
import json, statistics, sys
beyond = json.load(open(sys.argv[1]))
wan21 = [r["memory_ape"] for r in beyond["rows"] if r["group"].startswith("wan21") and r["memory_ape"] is not None]
assert len(wan21) == 28 and statistics.median(wan21) <= 0.10, wan21
wan22 = json.load(open(sys.argv[2]))
assert wan22["summary"]["memory_rows"] == 36 and wan22["summary"]["memory_median_ape"] <= 0.10, wan22["summary"]
for r in wan22["rows"]:
    if r["gpus"] > 1:
        assert r["memory_phase"] == "VAE decode" and r["memory_ape"] <= 0.10, r
    else:  # one GPU: the denoising peak with Wan2.2's per-token modulation
        assert r["memory_phase"] == "denoising" and r["memory_ape"] <= 0.10, r
PY
then pass=$((pass + 1)); else echo "FAIL validate-published-peaks"; fail=$((fail + 1)); fi
expect simulate-xdit-rules 2 "\[" -- simulate --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 --config tp=2
expect simulate-ditune-engine-runs-tp 0 "latency [0-9.]+ s" -- simulate --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 2 --config tp=2 --executor ditune
# A schedule that never repeats (the host drifting against the device) is not extrapolated:
# 10,000 steps of 8 stages x 64 patches would be 15 million tasks, refused at the limit.
expect simulate-too-many-tasks 2 "simulating 10000 steps of 'pipefusion=8,patches=64' takes more than 8 million tasks.*--steps" \
  -- simulate --model sd3-medium --gpu h100-sxm5-80gb --gpus 8 --config pipefusion=8,patches=64 --steps 10000 \
  --height 2048 --width 2048
expect simulate-oom 3 "DOES NOT FIT" -- simulate --model wan2.1-14b --gpu rtx4090-24gb --gpus 1 --config ""
expect simulate-invalid 2 "\[heads-divisible-by-ulysses-x-tp\]" -- simulate --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 5 --config ulysses=5
# A row ditune cannot price is refused with the reason; the others are predicted and counted.
{
  echo "group,model,height,width,frames,steps,scope,gpu,gpus,nodes,gpus_per_node,intra,inter,config,role,latency_s,source,runtime"
  echo "f,FLUX.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,1,1,8,nvlink4,none,,calibrate,6.71,s,"
  echo "f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,2,1,8,nvlink4,none,ulysses=2,predict,4.38,s,xdit"
  echo "f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,5,1,8,nvlink4,none,ulysses=5,predict,3.1,s,xdit"
  echo "f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,2,1,8,nvlink4,none,ulysses=2,predict,4.0,s,torchtitan"
} >"$tmp/refusing.csv"
expect validate-refuses-a-config 0 "refused: line 4 \(f\): config 'ulysses=5'" -- validate --suite "$tmp/refusing.csv"
expect validate-refuses-a-runtime 0 "refused: line 5 \(f\): runtime: unknown runtime 'torchtitan'" -- validate --suite "$tmp/refusing.csv"
expect validate-counts-refusals 0 "summary: rows=1 .* refused=2" -- validate --suite "$tmp/refusing.csv"
suite=$(dirname "$0")/../../data/validation/xdit-published-dev.csv
expect validate 0 "^summary: rows=94 median_ape=0\.[0-9]+ p90_ape=0\.[0-9]+ oom_agree=1/1$" -- validate --suite "$suite"
expect validate-json 0 '"median_ape":' -- validate --suite "$suite" --json
head -3 "$suite" >"$tmp/suite.csv"
echo 'g,pixart-alpha,1024,1024,1,20,e2e,a100-sxm4-80gb,2,1,8,nvlink3,none,cfg=2,predict,fast,x' >>"$tmp/suite.csv"
expect validate-bad-row 2 "suite.csv:4: latency_s 'fast'" -- validate --suite "$tmp/suite.csv"
printf 'group,model\n' >"$tmp/header.csv"
expect validate-bad-header 2 "header.csv:1: the header has no column" -- validate --suite "$tmp/header.csv"
expect validate-recorded 0 "summary: rows=94" -- validate --suite "$suite" --db "$tmp/val.db"
head -1 "$suite" >"$tmp/only-header.csv"
expect validate-no-rows 2 "only-header.csv: the suite has a header but no rows" -- validate --suite "$tmp/only-header.csv"
sed '3s/,[0-9.]*,\([^,]*\)$/,inf,\1/' "$suite" >"$tmp/inf.csv"
expect validate-inf 2 "inf.csv:3: latency_s 'inf' is not a positive number" -- validate --suite "$tmp/inf.csv"
# Learning the global constants, and leave-one-group-out on two groups.
expect learn 0 "^after: rows=94 median_ape=0\.[0-9]+ p90_ape=0\.[0-9]+ oom_agree=1/1" -- calibrate learn --suite "$suite" \
  --out "$tmp/factory.json" --db "$tmp/learned.db"
expect learn-shipped 0 'eager_op_us=' -- calibrate show --db "$tmp/learned.db"
expect learn-bad-suite 2 "header.csv:1: the header has no column" -- calibrate learn --suite "$tmp/header.csv"
expect learn-no-suite 2 "--suite FILE.csv is required" -- calibrate learn
grep -v ',predict,' "$suite" >"$tmp/no-predict.csv"
expect learn-no-predict-row 2 "the suite has no predict row with a published latency" -- calibrate learn \
  --suite "$tmp/no-predict.csv" --db "$tmp/learned.db"
expect learn-kept-constants 0 'eager_op_us=' -- calibrate show --db "$tmp/learned.db"
expect learn-bad-out-first 2 "--out '$tmp/none/f.json': cannot create a file in '$tmp/none'" -- calibrate learn \
  --suite "$suite" --out "$tmp/none/f.json"
sed '2s/,6.71,/,1e300,/' "$suite" >"$tmp/huge-calibrate.csv"
expect validate-calibrate-out-of-range 2 "huge-calibrate.csv:2: latency_s 1e300 is outside the physical range" -- \
  validate --suite "$tmp/huge-calibrate.csv"
sed '3s/,h100-sxm5-80gb,/,a100-sxm4-80gb,/' "$suite" >"$tmp/mixed-gpus.csv"
expect validate-group-mixes-gpus 2 "mixed-gpus.csv:3: group 'flux-dev-1024-h100' is flux.1-dev on h100-sxm5-80gb \(line 2\), this row flux.1-dev on a100-sxm4-80gb" \
  -- validate --suite "$tmp/mixed-gpus.csv"
head -11 "$suite" >"$tmp/two-groups.csv"
head -7 "$suite" >"$tmp/only-flux.csv"
expect cross-validate 0 "^cross-validated: by=group rows=8 median_ape=" -- validate --suite "$tmp/two-groups.csv" --cross-validate
# Questions from public threads: every shipped one is answered, right, wrong or unanswered,
# and counted; a bad file is refused naming the question and the field.
# The held-out tables (data/heldout: never fed to the factory calibration) parse and every
# row is predicted: none refused, none predicted not to fit.
expect validate-heldout-legacy 0 "summary: rows=102 median_ape=[0-9.]+ p90_ape=[0-9.]+ oom_agree=0/0" -- \
  validate --suite "$DITUNE_DATA/heldout/xdit-legacy-plots.csv"
expect validate-heldout-other-runtimes 0 "summary: rows=22 median_ape=[0-9.]+ p90_ape=[0-9.]+ oom_agree=0/0$" -- \
  validate --suite "$DITUNE_DATA/heldout/other-runtimes.csv"
expect validate-heldout-xdit-charts 0 "summary: rows=332 median_ape=[0-9.]+ p90_ape=[0-9.]+ oom_agree=0/0$" -- \
  validate --suite "$DITUNE_DATA/heldout/xdit-charts.csv"
# Its torch.compile bars are priced compiled (xDiT's --use_torch_compile), not refused.
expect validate-heldout-xdit-charts-compiled 0 '"refused": 0' -- \
  validate --suite "$DITUNE_DATA/heldout/xdit-charts.csv" --json
expect validate-questions 0 "^questions: [0-9]+ right=[0-9]+ wrong=[0-9]+ unanswered=[0-9]+$" -- \
  validate --questions "$DITUNE_DATA/validation/questions.json"
expect validate-questions-json 0 '"verdict": "(right|wrong|unanswered)"' -- \
  validate --questions "$DITUNE_DATA/validation/questions.json" --json
printf '{"questions": [{"id": "x", "source": "s", "question": "q", "answer": "a", "model": "flux.1-dev",
  "height": 1024, "width": 1024, "steps": 28, "gpu": "H100", "ask": "faster", "runs": [{"gpus": 1, "seconds": 1}]}]}' \
  >"$tmp/one-run.json"
expect validate-questions-one-run 2 "one-run.json: questions\[0\] \('x'\): ask 'faster' needs at least 2 runs" -- \
  validate --questions "$tmp/one-run.json"
expect validate-questions-with-suite 2 "--questions takes no --suite" -- \
  validate --questions "$tmp/one-run.json" --suite "$suite"
expect validate-questions-missing 2 "cannot read the questions file" -- validate --questions "$tmp/none.json"
expect cross-validate-one-group 2 "two groups or more" -- validate --suite "$tmp/only-flux.csv" --cross-validate
expect cross-validate-hold-out 0 "^cross-validated: by=group rows=3 median_ape=" -- validate --suite "$tmp/two-groups.csv" --cross-validate --hold-out pixart-1024-a100
# Two publishers' suites read as one: held out by publisher unless told otherwise.
beyond="$DITUNE_DATA/validation/published-beyond-xdit.csv"
{ head -1 "$beyond"; grep '^cd-flux-1008-l20,' "$beyond"; } >"$tmp/cache-dit-two-rows.csv"
expect cross-validate-by-source 0 "^cross-validated: by=source rows=9 median_ape=" -- validate --suite "$tmp/two-groups.csv" \
  --suite "$tmp/cache-dit-two-rows.csv" --cross-validate
expect cross-validate-by-source-table 0 "^vipshop +1 +1 " -- validate --suite "$tmp/two-groups.csv" \
  --suite "$tmp/cache-dit-two-rows.csv" --cross-validate
expect cross-validate-one-publisher 2 "two publishers or more \(its rows are all xDiT's" -- validate \
  --suite "$tmp/two-groups.csv" --cross-validate --by source
expect cross-validate-by-bad 2 "\-\-by 'nope': expected source or group" -- validate --suite "$tmp/two-groups.csv" \
  --cross-validate --by nope
expect by-alone 2 "\-\-by needs \-\-cross-validate" -- validate --suite "$tmp/two-groups.csv" --by group
expect validate-group-in-two-suites 2 "group 'flux-dev-1024-h100' is in .*two-groups.csv \(line 2\) and in .*only-flux.csv \(line 2\)" -- \
  validate --suite "$tmp/two-groups.csv" --suite "$tmp/only-flux.csv"
expect validate-two-suites 0 "^summary: rows=9 " -- validate --suite "$tmp/two-groups.csv,$tmp/cache-dit-two-rows.csv"
expect cross-validate-hold-out-unknown 2 "no group 'nope' in the suite to hold out; its groups: " -- validate --suite "$tmp/two-groups.csv" --cross-validate --hold-out nope
expect hold-out-alone 2 "\-\-hold-out needs \-\-cross-validate" -- validate --suite "$tmp/two-groups.csv" --hold-out pixart-1024-a100
expect factory-explained 0 "compute scale of h100-sxm5-80gb/flux.1-dev: [0-9.]+, learned from published runs" -- \
  plan --model flux.1-dev --height 1024 --width 1024 --steps 28 --gpu h100-sxm5-80gb --gpus 1 --explain \
  --db "$tmp/factory-fresh.db"
mkdir -p "$tmp/dbdir"
expect db-is-directory 2 "is a directory; give a file path" -- calibrate show --db "$tmp/dbdir"
expect validate-fits-stored 0 "e2e +h100-sxm5-80gb/flux.1-dev" -- calibrate show --db "$tmp/val.db"

# Planning, what-if and launch.
expect plan 0 "launch with xDiT: torchrun --nproc_per_node=8 examples/pixartalpha_example.py --model PixArt-alpha" -- \
  plan --model pixart-alpha --gpu l40-48gb --gpus 8 --explain
expect plan-compile 0 "launch with xDiT: .*--use_torch_compile" -- plan --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 4 --torch-compile
expect plan-compile-ditune 2 "--torch-compile and --parallel-vae are the PyTorch runtimes' options" -- plan --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 4 --torch-compile --executor ditune
expect plan-offload 0 "launch with xDiT: .*--enable_model_cpu_offload" -- plan --model hunyuanvideo --height 720 \
  --width 1280 --frames 129 --steps 50 --gpu l20-48gb --gpus 2
expect check-offload-ditune 2 "offload-is-xdits" -- check --model hunyuanvideo --height 720 --width 1280 --frames 129 \
  --gpu l20-48gb --gpus 2 --config ulysses=2,offload=1 --executor ditune
expect plan-latte-frames 2 "always generates 16 frames" -- plan --model latte-1 --frames 32 --gpu l20-48gb --gpus 8
expect plan-latte-ditune 2 "spatial and temporal blocks are priced by the planner but not executed" -- plan \
  --model latte-1 --gpu l20-48gb --gpus 8 --executor ditune
expect plan-explain 0 "wins on latency: .* s per generation" -- plan --model sd3-medium --gpu a100-sxm4-80gb --gpus 4 \
  --explain
expect plan-json 0 '"ranked": \[' -- plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 4 --json
expect plan-cached 0 "cached ranking" -- plan --model pixart-alpha --gpu l40-48gb --gpus 8
flags=$("$bin" plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --xdit-flags)
expect plan-flags-parse 0 "config: .* — valid" -- check --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --config "$flags"
expect plan-bad-objective 2 "--objective 'fastest' is not one of" -- plan --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 8 --objective fastest
# Mochi's untiled decode of 163 frames is past a 24 GB card (genmoai/mochi #107): the plan
# decodes tile by tile, and its script says so.
expect plan-vae-tiled 0 "vae=tiled" -- plan --model mochi-1 --height 480 --width 848 --frames 163 --gpu a30-24gb --gpus 4 --runtime diffusers
expect plan-vae-tiled-launch 0 "pipe.vae.enable_tiling\(\)" -- plan --model mochi-1 --height 480 --width 848 --frames 163 --gpu a30-24gb --gpus 4 --runtime diffusers --explain
expect simulate-phases 0 "memory by phase: text encoding .* peak: VAE decode" -- simulate --model mochi-1 --height 480 --width 848 --frames 163 --gpu a30-24gb --gpus 4 --runtime diffusers --config tp=4,vae=tiled
expect plan-infeasible 3 "the smallest \\(1 device\\) needs .* the largest part is the DiT's weights" -- plan --model stepvideo-t2v --gpu a10-24gb --gpus 1
expect whatif 0 "h100-sxm5-80gb .* 8 " -- whatif --model pixart-alpha --gpu l40-48gb,h100-sxm5-80gb --gpus 1,2,4,8 \
  --plot "$tmp/w.svg" --csv "$tmp/w.csv"
if grep -q "<svg" "$tmp/w.svg" && [[ $(wc -l <"$tmp/w.csv") -eq 9 ]]; then pass=$((pass + 1)); else
  echo "FAIL whatif-files"; fail=$((fail + 1)); fi
expect whatif-slo 0 "fewest GPU-seconds" -- whatif --model pixart-alpha --height 2048 --width 2048 --gpu l40-48gb \
  --gpus 1,2,4,8 --slo 10
expect whatif-slo-unmet 3 "no swept cluster meets 0.001 s" -- whatif --model pixart-alpha --gpu l40-48gb --gpus 1,2 \
  --slo 0.001
expect whatif-for-ditune 0 "h100-sxm5-80gb +nvlink4 +1024x1024 +4 +distrifusion=4" -- whatif --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 1,4 --executor ditune
expect whatif-bad-executor 2 "--executor: unknown runtime 'vllm' \(did you mean 'vllm-omni'\?\); valid: .*xdit.*any" -- whatif --model pixart-alpha \
  --gpu l40-48gb --gpus 1,2 --executor vllm
expect whatif-bad-list 2 "--gpus: 'two' is not an integer from 1 to 65536" -- whatif --model pixart-alpha --gpu l40-48gb \
  --gpus 1,two
# Serving: a layout's percentiles, an unstable layout, the layout search, files, bad input.
expect serve-layout 0 "SLO p99 <= 20 s: met" -- serve --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 8 --rate 0.5 --duration 600 --layout "4x(ulysses=2)" --slo 20 --csv "$tmp/s.csv" --plot "$tmp/s.svg"
if grep -q "<svg" "$tmp/s.svg" && head -1 "$tmp/s.csv" | grep -q "^id,arrival_s,start_s,finish_s" &&
  [[ $(wc -l <"$tmp/s.csv") -gt 200 ]]; then pass=$((pass + 1)); else echo "FAIL serve-files"; fail=$((fail + 1)); fi
expect serve-unstable 0 "UNSTABLE: the offered load is" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --rate 5 --duration 300 --layout "8x()"
expect serve-json 0 '"p99_s": null' -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --rate 5 --duration 60 \
  --layout "8x()" --json
expect serve-json-keys 0 '"goodput_rps"' -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --rate 0.2 \
  --duration 60 --layout "2x(ulysses=4)" --json
expect serve-search 0 "fewest GPUs for p99 <= 15 s at 0.3 requests/s: [0-9]+ GPUs as" -- serve --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 16 --nodes 2 --inter ib-ndr --rate 0.3 --duration 900 --slo 15 --policy size-aware \
  --mix 1024x1024:3,2048x2048:1
expect serve-dynamic 0 "layout dynamic over 8 GPUs" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --rate 0.5 --duration 300 --policy dynamic --layout "4x()+1x(ulysses=4)"
expect serve-slo-unreachable 3 "without any queueing" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --rate 0.5 --slo 0.1
printf 'arrival_s,height,width\n0,1024,1024\n0.5,2048,2048\n' >"$tmp/trace.csv"
expect serve-trace 0 "2 requests at" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --trace "$tmp/trace.csv" \
  --layout "2x(ulysses=2)"
printf 'arrival_s,height\n0,1000\n' >"$tmp/badtrace.csv"
expect serve-bad-trace 2 "badtrace.csv:2:" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --trace "$tmp/badtrace.csv" --layout "1x()"
expect serve-too-big 2 "takes 16 GPUs; the cluster has 8" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --rate 1 --layout "4x(ulysses=4)"
expect serve-bad-layout 2 "COUNTx\(CONFIG\)" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --rate 1 \
  --layout "4*(ulysses=2)"
expect serve-no-source 2 "exactly one of --rate R" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --layout "1x()"
expect serve-no-requests 2 "no request arrives in 1 s at 0.001 per second" -- serve --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 8 --rate 0.001 --duration 1 --layout "1x()"
expect serve-no-goal 2 "give --layout SPEC" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --rate 1
expect serve-bad-policy 2 "--policy .* is not one of: fcfs, size-aware, dynamic" -- serve --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 8 --rate 1 --layout "1x()" --policy random
expect serve-oom 2 "can serve none of the requests: 1 device: needs" -- serve --model flux.1-dev --gpu rtx4090-24gb \
  --gpus 8 --rate 0.1 --layout "8x()"
expect launch-dry-run 0 "^torchrun --nproc_per_node 8 'my script.py' --(ulysses|ring|pipefusion_parallel)_degree" -- launch --auto \
  --model pixart-alpha --gpu h100-sxm5-80gb --gpus 8 --dry-run -- torchrun --nproc_per_node 8 "my script.py"
expect launch-ditune 0 "^mpirun -np 2 ditune run --config " -- launch --auto --model tiny-pixart --gpu cpu --gpus 2 \
  --executor ditune --dry-run
expect plan-for-ditune 0 "^launch with ditune: mpirun -np 4 ditune run --backend cuda --config " -- plan \
  --model flux.1-dev --gpu h100-sxm5-80gb --gpus 4 --executor ditune
expect plan-bad-executor 2 "--executor: unknown runtime 'torch'; valid: .*ditune.*xdit" -- plan --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 4 --executor torch
expect plan-xdit-flags-for-ditune 2 "--xdit-flags plans for xDiT" -- plan --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 4 --executor ditune --xdit-flags
expect launch-ditune-gpu 0 "^mpirun -np 4 ditune run --backend cuda --config" -- launch --auto --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 4 --executor ditune --dry-run
expect launch-runs 0 "^launched --((ulysses|ring|pipefusion_parallel)_degree|use_cfg_parallel)" -- launch --auto --model pixart-alpha --gpu h100-sxm5-80gb \
  --gpus 2 -- echo launched
if ! command -v nvidia-smi >/dev/null; then
  expect launch-no-gpus 2 "no NVIDIA GPU detected" -- launch --auto --model flux.1-dev -- echo x
fi
expect launch-entry-point 0 "^torchrun --nproc_per_node=8 \\\$\\(which xdit\\) --model FLUX.1-dev --height 1024" -- \
  launch --auto --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --dry-run
expect launch-stepvideo 0 "run_parallel.py .* --num_frames 204 --infer_steps 50 --ulysses_degree" -- \
  launch --auto --model stepvideo-t2v --gpu h20-96gb --gpus 8 --dry-run

# The DiT engine on one device: the ref kernels here; cuda where a GPU answers.
expect engine-ref 0 "DiT \(device time, median of 2\)" -- run --backend ref --model tiny-flux --height 128 --width 128 \
  --steps 2 --iters 2 --config ""
expect engine-ref-emulate 0 "rank 3 of 'ulysses=2,cfg=2' \(its transfers left out\).*|modelled compute of rank 3" -- run \
  --backend ref --model tiny-sd3 --height 128 --width 128 --steps 2 --iters 1 --config ulysses=2,cfg=2 --emulate-rank 3 \
  --gpu h100-sxm5-80gb
expect engine-needs-mpirun 2 "needs 2 ranks: launch .mpirun -np 2.*--emulate-rank R \(0 to 1\)" -- run --backend ref --model tiny-flux \
  --steps 2 --config ulysses=2
expect cpu-comm 2 "--comm nccl moves GPU memory: it needs --backend cuda" -- run --model tiny-flux --steps 2 --config "" \
  --comm nccl
expect engine-bad-rank 2 "ranks 0 to 1" -- run --backend ref --model tiny-flux --steps 2 --config ulysses=2 --emulate-rank 2
expect engine-bad-backend 2 "--backend 'tpu': valid: cpu, cuda, ref" -- run --backend tpu --model tiny-flux --config ""
expect engine-auto-uncalibrated 2 "--auto: the ref kernels on this host are not calibrated" -- run --backend ref \
  --model tiny-flux --auto
expect engine-auto 0 "tiny-flux 64x64, 2 steps, batch 1 on .* \(cpu kernels\): 1 device" -- run --model tiny-flux \
  --steps 2 --iters 1 --auto
expect engine-too-big 2 "needs about [0-9.]+ GB on the device" -- run --backend ref --model stepvideo-t2v --steps 1 \
  --config ""
expect engine-ref-uncalibrated 0 "no prediction: the ref kernels on this host are not calibrated \(run .ditune calibrate compute --backend ref. first\)" \
  -- run --backend ref --model tiny-pixart --height 128 --width 128 --steps 2 --iters 1 --config ""
expect calibrate-ref-kernels 0 "elementwise" -- calibrate compute --backend ref --reps 2
# Calibrated, a ref run is predicted and recorded; its DiT time then calibrates the engine's scale.
expect engine-ref-predicted 0 "predicted [0-9.]+ s \([-+][0-9.]+%\)" -- run --backend ref \
  --model tiny-pixart --height 128 --width 128 --steps 2 --iters 1 --config ""
expect engine-ref-recorded 0 "recorded as run-[0-9]+-cpu-[0-9]+-[0-9]+ in" -- run --backend ref --model tiny-sd3 \
  --height 128 --width 128 --steps 2 --iters 1 --config ""
expect engine-ref-profile 0 "^gemm_gelu +[0-9]+ +[0-9.]+ .*[-+][0-9.]+%" -- run --backend ref \
  --model tiny-flux --height 128 --width 128 --steps 2 --iters 1 --config "" --profile
expect engine-ref-profile-recorded 0 "^recorded [0-9]+ kernel measurements \(one per kernel and shape" -- run \
  --backend ref --model tiny-pixart --height 128 --width 128 --steps 2 --iters 1 --config "" --profile
expect cpu-profile 0 "^gemm_gelu +[0-9]+ +[0-9.]+ " -- run --model tiny-flux --steps 2 --iters 1 --config "" \
  --profile
expect engine-scale-fitted 0 "cpu/ref/engine +[0-9]+ .*compute scale [0-9.]+ \(measured / modelled\)" -- calibrate fit
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect engine-cuda-no-gpu 1 "no CUDA device|compute backend 'cuda' is not built" -- run --backend cuda \
    --model tiny-flux --config ""
fi

# Numbers out of range, malformed lists and configs, unwritable outputs: exit 2, named.
expect hex-number 2 "'0x8' after --gpus: give numbers in decimal" -- simulate --model pixart-alpha \
  --gpu h100-sxm5-80gb --gpus 0x8 --config ""
expect huge-batch 2 "--batch must be 1 to 4096, got 1073741824" -- simulate --model pixart-alpha \
  --gpu h100-sxm5-80gb --gpus 1 --config "" --batch 1073741824
expect huge-height 2 "--height 2147483647: at most 32768 pixels" -- simulate --model pixart-alpha \
  --gpu h100-sxm5-80gb --gpus 1 --config "" --height 2147483647
expect huge-gpus 2 "--gpus 2147483647: give 1 to 65536" -- check --model pixart-alpha --gpu h100-sxm5-80gb \
  --gpus 2147483647 --config ""
expect zero-nodes 2 "--nodes 0: give >= 1" -- check --model pixart-alpha --gpu h100-sxm5-80gb --gpus 1 --nodes 0 \
  --config ""
expect empty-intra 2 "--intra is empty" -- check --model pixart-alpha --gpu h100-sxm5-80gb --gpus 1 --intra "" \
  --config ""
expect config-empty-item 2 "an empty item between commas" -- check --model pixart-alpha --gpu h100-sxm5-80gb \
  --gpus 4 --config "ulysses=2,,ring=2"
expect config-twice 2 "'ulysses' is given twice" -- check --model pixart-alpha --gpu h100-sxm5-80gb --gpus 4 \
  --config "ulysses=2,ulysses=4"
expect whatif-empty-item 2 "--gpus '1,,2': an empty item" -- whatif --model pixart-alpha --gpu l40-48gb --gpus 1,,2
expect whatif-size-overflow 2 "--sizes: '4294967312' is not an integer from 1 to 32768" -- whatif \
  --model pixart-alpha --gpu l40-48gb --gpus 1 --sizes 4294967312x16
expect whatif-zero-slo 2 "--slo 0: give the latency target in seconds, > 0" -- whatif --model pixart-alpha \
  --gpu l40-48gb --gpus 1 --slo 0
expect whatif-unwritable 2 "--csv '$tmp': is a folder; give a file name" -- whatif --model pixart-alpha \
  --gpu l40-48gb --gpus 1 --csv "$tmp"
expect trace-unwritable 2 "trace '$tmp/none/t.json': cannot create a file in '$tmp/none' \(No such file or directory\)" -- simulate \
  --model pixart-alpha --gpu h100-sxm5-80gb --gpus 1 --config "" --trace "$tmp/none/t.json"
# Results that cannot reach stdout fail; a store that cannot be made does not stop planning.
"$bin" plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --json >/dev/full 2>"$tmp/full.err"
rc=$?
if [[ $rc -eq 1 ]] && grep -q "the output could not be written to stdout" "$tmp/full.err"; then
  pass=$((pass + 1))
else
  echo "FAIL plan-stdout-full: exit $rc"; cat "$tmp/full.err"; fail=$((fail + 1))
fi
DITUNE_DB= HOME=/proc expect plan-no-home 0 "priced with the shipped factory calibration only" -- plan \
  --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 --explain
expect plan-sqlite-uri 2 "is an SQLite URI; give the database's file path" -- plan --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 2 --db "file:$tmp/x.db?mode=ro"
# A store on a full disk still serves what only reads it; a write names the cause. Needs a
# small file system of its own (a tmpfs; skipped, and said, where this host cannot mount one).
mkdir -p "$tmp/fullfs"
if mount -t tmpfs -o size=512k tmpfs "$tmp/fullfs" 2>/dev/null; then
  "$bin" calibrate show --db "$tmp/fullfs/s.db" >/dev/null 2>&1
  dd if=/dev/zero of="$tmp/fullfs/fill" bs=4k 2>/dev/null
  expect full-disk-show 0 "s.db: 0 measurements, [0-9]+ active fits" -- calibrate show --db "$tmp/fullfs/s.db"
  expect full-disk-plan 0 "launch with xDiT" -- plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 \
    --db "$tmp/fullfs/s.db"
  expect full-disk-ingest 1 "open read-only: the file system under it refused to write .*free space there" -- \
    calibrate ingest "$data/xdit_flux_4gpu.log" --gpu h100-sxm5-80gb --model flux.1-dev --config ulysses=4 \
    --db "$tmp/fullfs/s.db"
  umount "$tmp/fullfs"
else
  echo "note: the full-disk checks were skipped: this host cannot mount a tmpfs"
fi
# PipeFusion patch counts xDiT recomputes are launched as ranked, on many nodes and odd sizes.
for args in "--gpus 24 --nodes 3" "--gpus 48 --nodes 6" "--gpus 128 --nodes 16"; do
  # shellcheck disable=SC2086
  expect "plan-flux-${args// /}" 0 "launch with xDiT: torchrun --nnodes=" -- plan --model flux.1-dev \
    --gpu h100-sxm5-80gb $args --inter ib-ndr
done
expect plan-flux2-48 0 "launch with xDiT|launch with" -- plan --model flux.2-dev --gpu h100-sxm5-80gb --gpus 48 \
  --nodes 6 --inter ib-ndr
for size in 320x320 272x1024; do
  expect "plan-flux-$size" 0 "launch with xDiT: torchrun" -- plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
    --height "${size%x*}" --width "${size#*x}"
done
expect whatif-to-128 0 "128 +ulysses" -- whatif --model flux.1-dev --gpu h100-sxm5-80gb \
  --gpus 1,2,4,8,16,24,32,48,64,128 --inter ib-ndr
expect plan-nodes-too-few 2 "--gpus 12 on --nodes 1 puts 12 GPUs in a node; a h100-sxm5-80gb node holds at most 8: use --nodes 2" \
  -- plan --model flux.1-dev --gpu h100-sxm5-80gb --gpus 12 --nodes 1 --inter ib-ndr
expect whatif-uneven-nodes 0 "12 .*2 nodes of 6 GPUs" -- whatif --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8,12 \
  --inter ib-ndr
expect serve-zero-replicas-layout 2 "the replica count '0' is not an integer from 1" -- serve --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 --rate 0.1 \
  --layout '0x(ulysses=2)'
expect launch-ditune-with-command 2 "--runtime ditune launches ditune's own engine under mpirun; it runs no COMMAND \(got 'python3'" \
  -- launch --auto --model flux.1-dev --gpu h100-sxm5-80gb --gpus 2 --executor ditune --dry-run -- python3 x.py
expect run-huge-iters 2 "--iters must be 1 to 10000" -- run --model tiny-pixart --steps 2 --config "" \
  --iters 2147483647
"$bin" plan --model tiny-sd3 --gpu cpu --gpus 1 --json >"$tmp/plan-sd3.json" 2>/dev/null
printf 'not a plan' >"$tmp/not-a-plan.json"
expect run-plan-not-json 2 "--plan .*not-a-plan.json: not JSON \(.*line 1, column 2.*\); give the output of .ditune plan --json." \
  -- run --plan "$tmp/not-a-plan.json" --model tiny-pixart --steps 2
printf '{"ranked": []}' >"$tmp/empty-plan.json"
expect run-plan-empty 2 "--plan .*empty-plan.json: no configuration at ranked\[0\].config" -- run \
  --plan "$tmp/empty-plan.json" --model tiny-pixart --steps 2
expect launch-zero-gpus 2 "--gpus 0: give 1 to 65536, or leave it out" -- launch --auto --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 0 -- echo x
expect run-plan-other-workload 2 "was made for model \"tiny-sd3\", this run's is \"tiny-pixart\"" -- run \
  --plan "$tmp/plan-sd3.json" --model tiny-pixart --steps 2
expect flag-twice 2 "--model is given more than once" -- check --model pixart-alpha --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus 1 --config ""
expect plan-warmup-over-steps 2 "--warmup 99: at most the workload's 20 steps" -- plan --model pixart-alpha \
  --gpu h100-sxm5-80gb --gpus 4 --warmup 0,99
expect plan-empty-db 2 "--db is empty" -- plan --model pixart-alpha --gpu h100-sxm5-80gb --gpus 4 --db ""
expect plan-xdit-json 0 '"xdit_flags": "--(ulysses|ring|pipefusion_parallel)_degree' -- plan --model pixart-alpha --gpu h100-sxm5-80gb --gpus 4 \
  --xdit-flags --json
expect run-cluster-flag 2 "--gpus 4 but '1 device' needs 1" -- run --model tiny-pixart --steps 2 --config "" \
  --gpu cpu --gpus 4
expect run-bad-comm 2 "--comm 'bogus': valid: mpi, nccl" -- run --backend ref --comm bogus --model tiny-pixart \
  --steps 2 --config ""
DITUNE_COMM_TIMEOUT_S=1e12 expect run-huge-timeout-env 2 "DITUNE_COMM_TIMEOUT_S='1e12': .* at most 1e\+09" -- run \
  --model tiny-pixart --steps 1 --config ""
DITUNE_COMM_TIMEOUT_S=abc expect run-bad-timeout-env 2 "DITUNE_COMM_TIMEOUT_S='abc': .* a number >= 0" -- run \
  --model tiny-pixart --steps 2 --config ""

# Reproducers from the reliability issue: each exits 2 with a named reason, never a crash.
expect emulate-gpu-without-gpus 0 "modelled compute of rank 0: .* on 2 x h100-sxm5-80gb" -- run --model tiny-pixart \
  --steps 2 --iters 1 --config ulysses=2 --emulate-rank 0 --gpu h100-sxm5-80gb
expect emulate-empty-gpu 2 "--gpu is empty|unknown GPU" -- run --model tiny-pixart --steps 2 --config ulysses=2 \
  --emulate-rank 0 --gpu "" --gpus 2
expect emulate-zero-per-node 2 "--gpus-per-node" -- run --model tiny-pixart --steps 2 --config ulysses=2 \
  --emulate-rank 0 --gpu h100-sxm5-80gb --gpus 2 --gpus-per-node 0
expect overflow-simulate 2 "multiply to more than" -- simulate --model flux.1-dev --gpu h100-sxm5-80gb --gpus 8 \
  --config "--tensor_parallel_degree 65536 --ulysses_degree 65536"
expect empty-number 2 "--gpus '': not a valid value \(this flag takes a decimal number" -- check --model flux.1-dev \
  --gpu h100-sxm5-80gb --gpus "" --config ""
expect empty-number-eq 2 "--gpus '': not a valid value" -- check --model flux.1-dev --gpu h100-sxm5-80gb --gpus= \
  --config ""
printf 'source,kind,op,device,median_s\nimport,e2e,d\xffit,h100-sxm5-80gb,4.2\n' >"$tmp/not-utf8.csv"
expect ingest-not-utf8 2 "not-utf8.csv:2:13: byte 0xFF is not UTF-8" -- calibrate ingest "$tmp/not-utf8.csv" \
  --db "$tmp/utf8.db"
"$bin" calibrate ingest "$data/all_reduce_perf.txt" --gpu h100-sxm5-80gb --link nvlink4 --db "$tmp/stale.db" >/dev/null
if command -v sqlite3 >/dev/null; then
  sqlite3 "$tmp/stale.db" "PRAGMA user_version = 1;"
  expect db-stale-marker 2 "schema marker .* says version 1, but it already holds later tables" -- calibrate show \
    --db "$tmp/stale.db"
fi
expect db-empty 2 "calibration store path is empty \(--db" -- calibrate show --db ""
expect db-dev-null 2 "not a regular file" -- plan --model pixart-alpha --gpu h100-sxm5-80gb --gpus 2 --db /dev/null
mkfifo "$tmp/fifo.db"
expect db-fifo 2 "not a regular file" -- plan --model pixart-alpha --gpu h100-sxm5-80gb --gpus 2 --db "$tmp/fifo.db"
expect db-proc 2 "/proc/version: .*(give .*--db or DITUNE_DB)" -- calibrate show --db /proc/version

# The user's own machine: the doctor's verdicts and exit codes, and its topology in the plans.
doc=$(dirname "$0")/../data/doctor
expect doctor-p2p-off 4 "warning: all_reduce over nvlink3 \(4 ranks\): 5.2 GB/s .*2% of the 230" -- doctor --no-detect \
  --gpu a100-sxm4-80gb "$doc/all_reduce_perf.dgx-a100-4gpu-p2p-off.txt"
expect doctor-p2p-off-cost 4 "costs: Ulysses-4 for flux.1-dev 1024x1024: .*x instead of .*x on this machine" -- doctor \
  --no-detect --gpu a100-sxm4-80gb "$doc/all_reduce_perf.dgx-a100-4gpu-p2p-off.txt"
expect doctor-p2p-on 0 "healthy: nothing found" -- doctor --no-detect --gpu a100-sxm4-80gb \
  "$doc/all_reduce_perf.dgx-a100-4gpu-p2p-on.txt"
expect doctor-env 4 "NCCL_P2P_DISABLE=1 \(.*env.p2p-disabled.txt\)" -- doctor --no-detect --gpu a800 "$doc/env.p2p-disabled.txt"
NCCL_P2P_DISABLE=1 expect doctor-shell-env 4 "NCCL_P2P_DISABLE=1 \(this shell's environment\)" -- doctor --gpu a800
expect doctor-json 4 '"healthy": false' -- doctor --no-detect --gpu a100-sxm4-80gb --json \
  "$doc/all_reduce_perf.dgx-a100-4gpu-p2p-off.txt"
cp "$doc/all_reduce_perf.dgx-a100-4gpu-p2p-off.txt" "$tmp/run1.txt"
expect doctor-unnamed 2 "cannot tell which collective" -- doctor --no-detect --gpu a100-sxm4-80gb "$tmp/run1.txt"
expect doctor-collective 4 "all_reduce over nvlink3" -- doctor --no-detect --gpu a100-sxm4-80gb --collective all_reduce \
  "$tmp/run1.txt"
expect doctor-needs-gpu 2 "judging nccl-tests needs the GPU: pass --gpu" -- doctor --no-detect \
  "$doc/all_reduce_perf.dgx-a100-4gpu-p2p-off.txt"
expect doctor-unknown-file 2 "not a file the doctor reads; valid:" -- doctor --no-detect "$0"
expect doctor-missing-file 2 "cannot read '/nonexistent'" -- doctor --no-detect /nonexistent
expect doctor-abbreviated 2 "abbreviated \('...'\)" -- doctor --no-detect "$doc/topo.abbreviated.txt"
expect doctor-narrow-slot 4 "GPU 0 PCIe link: runs at x4 of x16" -- doctor --no-detect "$doc/query-gpu.2x5060ti-x4.csv"
expect doctor-topology 0 "8 GPUs on 2 CPU sockets \(0-3 \| 4-7\)" -- doctor --no-detect --gpu l20 \
  --write-topology "$tmp/box.json" "$doc/topo.8gpu-two-socket-4-per-switch.txt"
expect plan-topology 0 "pcie4 as laid out in .*box.json \(2 sockets, 4 GPUs a switch\).*
1 +ulysses=2,ring=2,pipefusion=2" -- plan --model flux.1-dev --gpu l20 --gpus 8 --topology "$tmp/box.json"
# The box's own layout (four GPUs a switch) prices the same configuration otherwise than the
# catalog's (two a switch): its in-socket all-to-all loads no shared uplink.
catalog_box=$("$bin" simulate --model flux.1-dev --gpu l20 --gpus 8 --config ulysses=4,pipefusion=2 --json 2>/dev/null |
  grep -m1 '"latency_s"')
own_box=$("$bin" simulate --model flux.1-dev --gpu l20 --gpus 8 --config ulysses=4,pipefusion=2 --json \
  --topology "$tmp/box.json" 2>/dev/null | grep -m1 '"latency_s"')
if [[ -n $catalog_box && -n $own_box && $catalog_box != "$own_box" ]]; then pass=$((pass + 1)); else
  echo "FAIL plan-catalog-box: the box's layout did not change the price ($catalog_box vs $own_box)"; fail=$((fail + 1)); fi
expect plan-topology-raw 0 "4 GPUs a switch" -- simulate --model flux.1-dev --gpu l20 --gpus 8 --config ulysses=4,ring=2 \
  --topology "$doc/topo.8gpu-two-socket-4-per-switch.txt"
expect plan-topology-bad 2 "abbreviated" -- plan --model flux.1-dev --gpu l20 --gpus 8 --topology "$doc/topo.abbreviated.txt"
expect plan-topology-too-small 2 "describes a node of 4 GPUs" -- plan --model flux.1-dev --gpu l20 --gpus 8 \
  --gpus-per-node 8 --topology "$doc/topo.4gpu-pxb-pix-two-socket.txt"

# A GPU of the user's own, from the template to a plan.
mkdir -p "$tmp/cat/hardware/gpus"
expect hardware-template 0 '"id": "my-gpu"' -- hardware --template gpu --like rtx6000ada-48gb
"$bin" hardware --template gpu --like rtx6000ada-48gb >"$tmp/cat/hardware/gpus/my-gpu.json"
expect catalog-hardware 0 "gpu my-gpu \(new, from .*my-gpu.json\)" -- hardware --catalog "$tmp/cat"
expect catalog-plan 0 "on 4 x my-gpu" -- plan --catalog "$tmp/cat" --model flux.1-dev --gpu my-gpu --gpus 4
DITUNE_CATALOG=$tmp/cat expect catalog-env 0 "on 4 x my-gpu" -- plan --model flux.1-dev --gpu my-gpu --gpus 4
expect catalog-missing 2 "user catalog '/nonexistent' \(--catalog or DITUNE_CATALOG\) is not a directory" -- \
  models --catalog /nonexistent
expect catalog-no-value 2 "--catalog needs a directory" -- models --catalog
printf '{"id": "my-gpu"}' >"$tmp/cat/hardware/gpus/my-gpu.json"
expect catalog-bad-file 2 "my-gpu.json: missing field" -- plan --catalog "$tmp/cat" --model flux.1-dev --gpu my-gpu --gpus 4
expect hardware-template-kind 2 "--template 'switch': give gpu or link" -- hardware --template switch
expect hardware-template-like 2 "unknown GPU 'h900'" -- hardware --template gpu --like h900

expect launch-topology 0 "ulysses=2,ring=2,pipefusion=2 \(predicted" -- launch --auto --model flux.1-dev --gpu l20 --gpus 8 \
  --dry-run --topology "$doc/topo.8gpu-two-socket-4-per-switch.txt"

# Every plan says how to measure its figure.
expect plan-reproduce 0 "to measure the winner's figure:
- the figure is one generation with the weights loaded and warm" -- plan --model flux.1-dev --gpu h100 --gpus 4
expect plan-reproduce-runtime 0 "how xDiT times it: the xdit runner" -- plan --model flux.1-dev --gpu h100 --gpus 4
expect plan-reproduce-json 0 '"reproduce": \[' -- plan --model flux.1-dev --gpu h100 --gpus 4 --json

# On a machine with GPUs the doctor runs nvidia-smi itself (here a stand-in that prints the
# saved outputs of a two-socket box of L20s, one of them at x8).
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/nvidia-smi" <<FAKE
#!/usr/bin/env bash
case "\$*" in
  "topo -m") cat "$doc/topo.8gpu-two-socket-4-per-switch.txt" ;;
  "topo -p2p p") exit 1 ;;
  "-q") sed -e 's/NVIDIA H800/NVIDIA L20/' -e 's/81559/46068/' -e 's/Current                   : 16x/Current                   : 8x/' \
          "$doc/smi-q.h800-healthy.txt" ;;
  *) exit 1 ;;
esac
FAKE
chmod +x "$tmp/fakebin/nvidia-smi"
PATH="$tmp/fakebin:$PATH" expect doctor-detects 4 "GPU 0 \(00000000:18:00.0\) PCIe link: runs at x8 of x16" -- doctor
PATH="$tmp/fakebin:$PATH" expect doctor-detects-topology 4 "8 GPUs on 2 CPU sockets" -- doctor
expect ingest-slow-names-doctor 2 "ditune doctor .*slow.csv --gpu h100-sxm5-80gb" -- calibrate ingest "$tmp/slow.csv" \
  --db "$tmp/slow2.db"

# Every figure has its 80% interval and the provenance of its compute figure.
expect plan-interval 0 "1 +[a-z0-9=,]+ +[0-9.]+ ±[0-9]+%" -- plan --model flux.1-dev --gpu h100 --gpus 4
expect plan-interval-explain 0 "80% interval of the winner's figure: .* learned from published runs" -- plan \
  --model flux.1-dev --gpu h100 --gpus 4 --explain
# Where the host time of an eager block comes from: counted on its code, or by hand.
expect plan-host-ops-counted 0 "eager host ops of flux.1-dev's blocks: joint 114, single 68 ATen ops a forward, counted on its block code \(data/measured/" -- plan \
  --model flux.1-dev --gpu h100 --gpus 4 --explain
expect plan-host-ops-by-hand 0 "eager host ops of stepvideo-t2v's blocks: counted by hand per block family" -- plan \
  --model stepvideo-t2v --gpu h100 --gpus 8 --explain
expect simulate-interval-catalog 0 "widened by the spread of .* published compute scales" -- simulate --model wan2.1-14b \
  --gpu h100 --gpus 8 --config ulysses=8
expect simulate-interval-json 0 '"predicted_hi_s": [0-9.]+' -- simulate --model flux.1-dev --gpu h100 --gpus 4 \
  --config ulysses=4 --json
expect validate-interval 0 "interval: [0-9]+ of [0-9]+ published values inside their 80% interval" -- validate \
  --suite "$DITUNE_DATA/validation/published-beyond-xdit.csv"
printf "[1, 2]" >"$tmp/notvalidate.json"
expect intervals-bad 2 "not a .ditune validate --json. document" -- calibrate intervals --from "$tmp/notvalidate.json"
expect intervals-malformed 2 "malformed JSON" -- calibrate intervals --from "$doc/topo.abbreviated.txt"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
