// Global mechanism constants: how an eager framework issues work and how collectives behave
// on a class of link, in numbers that hold for every model, GPU and resolution.
//
// They are not per model, per GPU or per run: each names one mechanism of the hardware or
// of xDiT's software stack, with a default from first principles, and `ditune calibrate
// learn` fits them on a published training suite (planner/learn.h). The fitted values ship
// as data (data/calibration/factory.json), seed every new store as a fit of kind
// "mechanisms", and apply wherever the cost models are built (MakeCostModels).
#ifndef DITUNE_COSTMODELS_MECHANISMS_H_
#define DITUNE_COSTMODELS_MECHANISMS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ditune {

inline constexpr const char* kFitKindMechanisms = "mechanisms";
// The key of the mechanisms fit: the software stack they describe.
inline constexpr const char* kMechanismsKeyXdit = "xdit";

struct Mechanisms {
  // Host time of one framework op in eager PyTorch (Python, dispatch, launch), µs.
  double eager_op_us = 15;
  // Host time of one generated kernel under torch.compile (no Python between ops), µs.
  double compiled_op_us = 5;
  // Device time of a DiT under torch.compile over the same DiT eager: compute scales are
  // learned on eager runs, and the compiler fuses their chains of elementwise kernels.
  // Learned on the training suites' compiled runs (cache-dit's on L20s, diffusers-torchao's
  // on an H100 and an A100, diffusers' CogVideoX doc: data/validation/compile-published.csv),
  // judged on their loss alone (MechanismParam::compiled_only). The default, where learning
  // starts, is one published pair, xDiT's (docs/performance/flux.md, Flux.1-dev 1024² 28
  // steps on one H100: 6.71 s eager, 4.30 s with torch.compile): (4.30 - 0.04) / (6.71 - 0.04).
  double compiled_device_scale = 0.64;
  // Eager host time of a block's own ops (its framework ops and kernel launches, as counted
  // in costmodels/dit_ops.cc) measured over counted, per block family: the cross-attention
  // blocks (diffusers' BasicTransformerBlock of PixArt and of Latte's spatial and temporal
  // blocks, HunyuanDiT's, Sana's, Wan's), the double-stream joint blocks (SD3, Flux,
  // CogVideoX, HunyuanVideo) and the single-stream blocks (Flux, HunyuanVideo).
  double cross_host_scale = 1;
  double joint_host_scale = 1;
  double single_host_scale = 1;
  // Framework ops around each Ulysses all-to-all (reshape, transpose, contiguous, the
  // collective, and back: the sequence-parallel library's wrapper), per tensor.
  double ulysses_ops = 9;
  // Framework ops of one Ring merge of partial attention outputs (log-sum-exp rescaling).
  double ring_merge_ops = 15;
  // Framework ops of one Ring attention call, whatever its degree: the autograd function's
  // entry, the K/V contiguous copies and the cache manager's look-up, the ring's process-group
  // set-up, the joint text K/V concatenated at the first step, and the output and
  // log-sum-exp conversions at the end (xDiT's xdit_ring_flash_attn_forward: sixteen by
  // count).
  double ring_call_ops = 16;
  // Framework ops PipeFusion adds to each block's attention for each patch: the patch's fresh
  // K and V written into the stale full-sequence buffer and the buffer read back (xDiT's
  // cache manager, update_and_get_kv_cache), and the runtime state's patch bookkeeping. Eight
  // by count of the copies and views; learned, since the training suite's PipeFusion rows
  // (every one xDiT's) are what prices the bookkeeping around them.
  double pipefusion_patch_ops = 8;
  // Achieved fraction of the link's catalog bus bandwidth for all-to-all over a switched
  // fabric (NVLink / NVSwitch, xGMI): n - 1 concurrent peer streams instead of a ring.
  double switch_alltoall_efficiency = 1;
  // The same on a PCIe box (two sockets, GPUs on PCIe switches): NCCL stages all-to-all
  // through host memory when GPU peer access is off, and every pair crosses the host. It
  // applies to each GPU's link and to each switch's uplink alike (both one x16 link).
  double pcie_alltoall_efficiency = 1;
  // Achieved fraction of a PCIe box's catalog bandwidth for all-reduce (a ring: two of its
  // hops cross the sockets).
  double pcie_allreduce_efficiency = 1;
  // Achieved fraction of a PCIe box's catalog point-to-point bandwidth (Ring passes,
  // PipeFusion patches).
  double pcie_p2p_efficiency = 1;
  // Achieved fraction of the memory-bound ops' catalog bandwidth (80% of the HBM's: the
  // norms, modulations, activations, rotary embeddings and copies of every block, and the
  // video VAE's vol2col traffic), where no curve was measured. Eager PyTorch runs them as
  // several kernels each: on an H200, one eager op moved its counted bytes at 3-76% of the
  // HBM's bandwidth, 19% over all of them by bytes (data/measured/h200-20261128/
  // torch_ops.csv). Priced too fast, they made a (GPU, model)'s cost grow too steeply with
  // the sequence (attention's share grows with it), which one compute scale per pair cannot
  // follow: PixArt's single-A100 runs of xDiT's legacy charts were priced 11% under at 1024²
  // and 5% over at 4096² (5% under and 4% over since), and on one L40 in xDiT's suite 4%
  // under at 1024² and 9% over at 4096² (0% and 2% over since).
  double memory_efficiency = 1;
  // Measured over modelled VAE decode of images, and of videos decoded frame by frame by an
  // image VAE (no temporal compression: Latte): the 2-D decoder's convolutions against the
  // GEMM roofline the model assumes.
  double image_vae_scale = 1;
  // Measured over modelled decode of video VAEs that compress time: causal 3-D convolutions,
  // priced by their vol2col traffic at memory bandwidth (VaeDecodeOp); a non-parallel part
  // of every video run.
  double video_vae_scale = 1;

  // Achieved fraction of a PCIe box's inter-socket bandwidth (the host path between the
  // sockets that every crossing transfer shares) for collectives over both sockets.
  double cross_socket_efficiency = 1;

  // The same for all-to-all across the sockets, where every pair of ranks on different
  // sockets exchanges at once through the host (ring collectives cross the sockets on two
  // hops, in large pipelined chunks; all-to-all crosses on a x b pairs, in small ones).
  double cross_socket_alltoall_efficiency = 1;
  // Fixed time of one all-to-all across a PCIe box's sockets, µs, on top of the link's
  // latency. By default NCCL uses peer-to-peer only between GPUs behind PCIe switches
  // (NVIDIA/nccl @5067397c src/graph/paths.cc: "By default don't use P2P across CPU Host
  // Bridges and further apart", p2pLevel = PATH_PXB; on AMD CPUs with two GPUs at most,
  // PATH_SYS) and moves the other pairs through host memory (the SHM transport, "used
  // between devices when peer-to-peer cannot happen"): every crossing pair of an all-to-all
  // is a staged copy with its handshakes, at every call, where the bandwidth term counts
  // only bytes. The default is where learning starts, not a measurement: an nccl-tests
  // all-to-all file of the box, ingested, replaces the whole curve.
  double cross_socket_alltoall_latency_us = 50;

  friend bool operator==(const Mechanisms&, const Mechanisms&) = default;
};

// One constant: its JSON name, what it is, its bounds for learning.
struct MechanismParam {
  const char* name;
  double Mechanisms::*member;
  double lo, hi;  // physically meaningful range: learning stays inside it
  const char* what;
  // Only runs under torch.compile are priced with it: learning judges a move on those rows.
  bool compiled_only = false;
};
const std::vector<MechanismParam>& MechanismParams();

// {"eager_op_us": 15, ...}: every constant.
nlohmann::json MechanismsToJson(const Mechanisms& m);
// Reads an object of constants; missing ones keep their defaults. InvalidArgument naming
// the key for an unknown name (listing the valid ones), a non-number, or a value outside its
// bounds.
StatusOr<Mechanisms> MechanismsFromJson(const nlohmann::json& j);

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_MECHANISMS_H_
