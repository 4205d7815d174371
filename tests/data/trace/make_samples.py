#!/usr/bin/env python3
"""Writes the sample PyTorch profiler traces in this folder (run from anywhere; deterministic).

The samples imitate what torch.profiler's export_chrome_trace (Kineto) writes for one
denoising step of an xDiT Ulysses run on two H100s: a "ProfilerStep#N" window on the main
thread, cpu_op / cuda_runtime / kernel events linked by "correlation", "External id" and ac2g
flow events, and record_param_comms ops carrying the collective's arguments.
  profile_trace_rank_0.json     newer Kineto: NCCL kernels carry the collective's arguments
  profile_trace_rank_1.json.gz  older Kineto, gzipped: NCCL kernels linked only by External
                                id; ProfilerStep as a cpu_op; one launch on another thread
  profile_trace_1gpu.json       one GPU, no communication
"""
import gzip
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PID, TID = 4242, 4242

GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_"
        "execute_segment_k_off_kernel__5x_cublas")
FLASH = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
         "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
         "false, false, false, true, true, false>(flash::Flash_fwd_params)")
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
        "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}"
        "::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::"
        "native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
        "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail"
        "::Array<char*, 2>)")
NORM = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
        "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
        "float*, c10::BFloat16*)")
MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, "
       "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::"
       "Array<char*, 2> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
       "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)")
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::BFloat16>, at::detail::"
        "Array<char*, 1>)")
SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
BCAST = "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"

# all_to_all of one Ulysses rank's q, k, v and output: 2304 tokens x 3072 bf16 values.
A2A = dict(coll="all_to_all", nin=7077888, nout=7077888, dtype="BFloat16")


def step_kernels(a2a_us):
    """One denoising step: (kernel name, GPU µs, collective or None); a None name is the sync."""
    a = iter(a2a_us)
    return [(GEMM, 310.5, None), (SENDRECV, next(a), A2A), (SENDRECV, next(a), A2A),
            (SENDRECV, next(a), A2A), (FLASH, 820.25, None), (SENDRECV, next(a), A2A),
            (GEMM, 310.5, None), (NORM, 35.5, None), (GEMM, 310.5, None), (GELU, 42.0, None),
            (GEMM, 310.5, None), (None, 0, None), (SENDRECV, next(a), A2A),
            (SENDRECV, next(a), A2A),
            (BCAST, 12.0, dict(coll="broadcast", nin=16, nout=16, dtype="Long")),
            (MUL, 6.5, None),
            (ALLGATHER, 18.4, dict(coll="_allgather_base", nin=131072, nout=262144,
                                   dtype="BFloat16"))]


def trace(rank, world, a2a_us, new_kineto, extra_thread):
    ev = []
    corr = [100]
    ext = [1]

    def nid(box):
        box[0] += 1
        return box[0]

    gpu_t = [0.0]

    def launch(t, name, gpu_us, coll, api="cudaLaunchKernel", dur=6.0):
        c = nid(corr)
        e = nid(ext)
        if coll:
            cargs = {"Collective name": coll["coll"], "dtype": coll["dtype"],
                     "In msg nelems": coll["nin"], "Out msg nelems": coll["nout"],
                     "Group size": world, "In split size": "[]", "Out split size": "[]",
                     "Process Group Name": "1", "Process Group Description": "undefined",
                     "Process Group Ranks": "[0, 1]", "Rank": rank}
            ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": PID,
                       "tid": TID, "ts": round(t - 3, 3), "dur": dur + 5,
                       "args": dict({"External id": e, "Record function id": 0}, **cargs)})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": api, "pid": PID, "tid": TID,
                   "ts": round(t, 3), "dur": dur,
                   "args": {"External id": e, "cbid": 211 if api == "cudaLaunchKernel" else 430,
                            "correlation": c}})
        ev.append({"ph": "s", "id": c, "pid": PID, "tid": TID, "ts": round(t, 3), "cat": "ac2g",
                   "name": "ac2g"})
        start = max(gpu_t[0], t + 8.0)
        kargs = {"External id": e, "queued": 0, "device": rank, "context": 1, "stream": 7,
                 "correlation": c, "registers per thread": 128, "shared memory": 0,
                 "blocks per SM": 1.0, "warps per SM": 4.0, "grid": [132, 1, 1],
                 "block": [128, 1, 1], "est. achieved occupancy %": 6}
        if coll and new_kineto:
            kargs.update({k: v for k, v in cargs.items()
                          if k in ("Collective name", "In msg nelems", "Out msg nelems",
                                   "Group size", "dtype", "Process Group Name",
                                   "Process Group Description", "Process Group Ranks")})
        if coll:
            kargs["stream"] = 23
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": rank,
                   "tid": kargs["stream"], "ts": round(start, 3), "dur": gpu_us, "args": kargs})
        ev.append({"ph": "f", "id": c, "pid": rank, "tid": kargs["stream"], "ts": round(start, 3),
                   "cat": "ac2g", "name": "ac2g", "bp": "e"})
        gpu_t[0] = start + gpu_us + 2.0

    ev.append({"name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": 0,
               "args": {"name": "python3"}})
    ev.append({"name": "process_name", "ph": "M", "ts": 0, "pid": rank, "tid": 0,
               "args": {"name": "GPU %d" % rank}})
    # Before the profiled step: a fill the window does not count.
    launch(200.0, FILL, 3.0, None)
    step = {"ph": "X", "cat": "user_annotation" if new_kineto else "cpu_op",
            "name": "ProfilerStep#3", "pid": PID, "tid": TID, "ts": 1000.0, "dur": 19000.0,
            "args": {"External id": nid(ext), "Record function id": 0}}
    ev.append(step)
    if new_kineto:  # the step again on the GPU's timeline, where its kernels ran
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3",
                   "pid": rank, "tid": 7, "ts": 1107.0, "dur": 19500.0,
                   "args": {"External id": step["args"]["External id"]}})
    t = 1100.0
    for name, us, coll in step_kernels(a2a_us) if world > 1 else [
            k for k in step_kernels([0] * 6) if k[2] is None]:
        if name is None:  # latents.item(): copy to the host, then wait for the GPU
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": PID,
                       "tid": TID, "ts": t, "dur": 10.0,
                       "args": {"External id": nid(ext), "cbid": 41, "correlation": nid(corr)}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize",
                       "pid": PID, "tid": TID, "ts": t + 12.0, "dur": 2500.0,
                       "args": {"External id": nid(ext), "cbid": 131, "correlation": nid(corr)}})
            t += 2600.0
            continue
        launch(t, name, us, coll, "cudaLaunchKernelExC" if coll else "cudaLaunchKernel",
               9.0 if coll else 6.0)
        t += 45.0
    if extra_thread:
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID,
                   "tid": 4300, "ts": 5000.0, "dur": 7.0,
                   "args": {"External id": nid(ext), "cbid": 211, "correlation": nid(corr)}})
    ev.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "",
               "ts": 21000.0})
    doc = {"schemaVersion": 1,
           "deviceProperties": [{"id": rank, "name": "NVIDIA H100 80GB HBM3",
                                 "totalGlobalMem": 84942979072, "computeMajor": 9,
                                 "computeMinor": 0, "numSms": 132}],
           "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000,
           "traceEvents": ev, "traceName": "profile_trace_rank_%d.json" % rank}
    if world > 1 and new_kineto:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world,
                                  "pg_count": 1, "nccl_version": "2.21.5"}
    return json.dumps(doc, indent=None, separators=(", ", ": ")).replace(
        "}, {", "},\n  {") + "\n"


def main():
    with open(os.path.join(HERE, "profile_trace_rank_0.json"), "w") as f:
        f.write(trace(0, 2, [101.2, 98.7, 99.5, 100.1, 250.3, 99.9], True, False))
    data = trace(1, 2, [102.0, 99.0, 101.0, 100.0, 98.0, 97.0], False, True).encode()
    with open(os.path.join(HERE, "profile_trace_rank_1.json.gz"), "wb") as f:
        f.write(gzip.compress(data, mtime=0))
    with open(os.path.join(HERE, "profile_trace_1gpu.json"), "w") as f:
        f.write(trace(0, 1, [], True, False))


if __name__ == "__main__":
    main()
