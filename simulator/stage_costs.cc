#include "simulator/stage_costs.h"

#include <algorithm>
#include <cmath>

namespace ditune {
namespace {

// Adds the op's device time to its kernel's and class's; nothing when `breakdown` is null
// (the breakdown is off: the planner's searches do not need it).
void AddByKernel(const OpCost& op, Seconds device, KernelBreakdown* breakdown) {
  if (breakdown != nullptr) breakdown->Add(op, device);
}

// Sums device and host times of the ops into the phases around the attention op "attn";
// `attn_device` / `attn_host`, when given, replace the attention op's own times; with
// `breakdown`, each op's device time also goes to c->kernels.
void Phases(const ComputeModel& cm, const std::vector<OpCost>& ops, BlockCost* c, bool breakdown,
            const Seconds* attn_device = nullptr, const Seconds* attn_host = nullptr) {
  bool after = false;
  for (const auto& op : ops) {
    const bool is_attn = op.name == "attn";
    const Seconds d = is_attn && attn_device != nullptr ? *attn_device : cm.DeviceTime(op);
    const Seconds h = is_attn && attn_host != nullptr ? *attn_host : cm.HostTime(op);
    if (!is_attn || attn_device == nullptr) AddByKernel(op, d, breakdown ? &c->kernels : nullptr);
    if (op.name == "attn") {
      c->attn += d;
      c->attn_host += h;
      after = true;
    } else if (after) {
      c->post += d;
      c->post_host += h;
    } else {
      c->pre += d;
      c->pre_host += h;
    }
  }
}

// `n` forwards of the block one after another: every phase, collective and host time n times.
BlockCost Repeated(BlockCost c, int n) {
  if (n == 1) return c;
  for (Seconds* t : {&c.pre, &c.a2a_in, &c.attn, &c.ring_exposed, &c.a2a_out, &c.post, &c.tp, &c.fsdp, &c.pre_host,
                     &c.attn_host, &c.post_host}) {
    *t = *t * n;
  }
  c.kernels.Scale(n);
  return c;
}

// A learned op count as the whole number of framework ops it stands for.
int FrameworkOps(double ops) { return std::max(0, static_cast<int>(std::lround(ops))); }

}  // namespace

void KernelBreakdown::Scale(double k) {
  for (auto& [name, t] : by_kernel) t = t * k;
  for (auto& t : by_class) t = t * k;
}

void KernelBreakdown::Add(const OpCost& op, Seconds device) {
  if (op.host_only) return;
  by_kernel[op.kernel.empty() ? "other" : op.kernel] += device;
  by_class[static_cast<int>(op.cls)] += device;
}

StageCosts::StageCosts(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
                       const ParallelConfig& config, const RankLayout& layout, const ComputeModel& compute,
                       const CommModel& comm, bool kernel_breakdown, TpSplit tp_split, int sequential_forwards,
                       bool ring_merge_fused)
    : model_(model),
      tokens_(tokens),
      config_(config),
      layout_(layout),
      compute_(compute),
      comm_(comm),
      kernel_breakdown_(kernel_breakdown),
      tp_split_(tp_split),
      ring_merge_fused_(ring_merge_fused) {
  work_patched_ = ComputeRankWork(model, tokens, workload, config, tp_split);
  ParallelConfig whole = config;
  whole.patches = 1;
  whole.pipefusion = 1;
  work_full_ = ComputeRankWork(model, tokens, workload, whole, tp_split);
  if (config.pipefusion > 1 && compute.runtime() != Runtime::kEngine) {
    // xDiT's PipeFusion runs every patch's forward with the whole text: its Flux wrapper
    // passes the whole encoder_hidden_states through every double- and single-stream block
    // of each patch, its SD3 wrapper feeds each later patch the text cached from the first
    // and still computes the text stream (transformer_sd3.py: `_, hidden_states = block(...,
    // encoder_hidden_states=self.encoder_hidden_states_cache[i], ...)`), and diffusers'
    // cross-attention projects the text's K/V on every call. ditune's engine carries the
    // text with the first patch only.
    work_patched_.txt_tokens = work_full_.txt_tokens;
    work_patched_.text_each_patch = true;
  }
  const int forwards = std::max(1, sequential_forwards);
  if (forwards > 1) {
    work_patched_.batch = std::max(1, work_patched_.batch / forwards);
    work_full_.batch = std::max(1, work_full_.batch / forwards);
  }
  // Rank 0 represents its groups, alike for every family: each axis's sharing once.
  for (Axis a : {Axis::kUlysses, Axis::kRing, Axis::kTp}) {
    if (layout.degree(a) > 1) share_[static_cast<int>(a)] = comm.Sharing(layout.GroupOf(0, a), layout, a);
  }
  for (BlockFamily f : kAllBlockFamilies) {
    if (model.num_blocks(f) == 0) continue;
    full_[static_cast<int>(f)] = Repeated(Cost(f, work_full_, config), forwards);
    patched_[static_cast<int>(f)] = Repeated(Cost(f, work_patched_, config), forwards);
  }
  if (model.control.blocks > 0) {
    // The ControlNet: split like the DiT (controlnet=parallel) or whole on every rank, with
    // no collective of its own; its blocks' costs for one forward, and the all-gathers of the
    // DiT's split stream that adding its whole-sequence hints takes.
    ParallelConfig alone = config;
    if (config.controlnet != ControlNetPlacement::kParallel) alone.ulysses = alone.ring = alone.tp = 1;
    alone.pipefusion = alone.patches = 1;
    RankWork work = work_full_;
    if (!(alone == config)) {
      work = ComputeRankWork(model, tokens, workload, alone, tp_split);
      work.batch = std::max(1, work.batch / forwards);
    }
    const BlockCost one = Repeated(Cost(model.control.family, work, alone), forwards);
    control_.pre = one.pre * model.control.blocks;
    control_.attn = one.attn * model.control.blocks;
    control_.post = one.post * model.control.blocks;
    control_.a2a_in = one.a2a_in * model.control.blocks;
    control_.a2a_out = one.a2a_out * model.control.blocks;
    control_.ring_exposed = one.ring_exposed * model.control.blocks;
    control_.tp = one.tp * model.control.blocks;
    control_.pre_host = one.pre_host * model.control.blocks;
    control_.attn_host = one.attn_host * model.control.blocks;
    control_.post_host = one.post_host * model.control.blocks;
    if (config.sp() > 1) {
      const auto group = layout.GroupOf(0, Axis::kSp);
      const Bytes stream(kElementBytes * work_full_.batch *
                         static_cast<double>(tokens.image_tokens() + tokens.text_tokens) * model.hidden);
      control_gather_ = comm.Time(Collective::kAllGather, stream, group) * (model.control.gathers * forwards);
    }
  }
  // torch.compile fuses the eager DiT's kernels (Mechanisms::compiled_device_scale): the
  // blocks' and the step's own device time, not the methods' copies and collectives.
  const double compiled = compute.runtime() == Runtime::kCompiled ? compute.mechanisms().compiled_device_scale : 1.0;
  // An eager forward's host time outside the blocks: where the model has the ATen ops its
  // code dispatches there (ModelSpec::step_host_ops), the counted ops scaled to that total, as
  // a block's are.
  const bool eager = compute.runtime() == Runtime::kEager;
  auto step_overhead = [&](const RankWork& work, Seconds* device, Seconds* host, KernelBreakdown* kernels) {
    const std::vector<OpCost> ops = StepOverheadOps(model, work);
    int counted = 0;
    Seconds issued;
    for (const auto& op : ops) {
      const Seconds t = compute.DeviceTime(op) * compiled;
      *device += t;
      issued += compute.HostTime(op);
      counted += op.kernels;
      AddByKernel(op, t, kernel_breakdown ? kernels : nullptr);
    }
    if (eager && model.step_host_ops.outside > 0 && counted > 0) issued = issued * (model.step_host_ops.outside / counted);
    *host += issued;
  };
  if (compute.runtime() != Runtime::kEngine && model.step_host_ops.scheduler > 0 &&
      compute.launch_overhead().value() > 0) {
    // The scheduler runs eagerly under either runtime: the eager time per op.
    const Seconds per_op = eager ? compute.launch_overhead() : Microseconds(compute.mechanisms().eager_op_us);
    scheduler_host_ = per_op * model.step_host_ops.scheduler;
  }
  step_overhead(work_full_, &overhead_full_, &overhead_host_full_, &overhead_kernels_full_);
  step_overhead(work_patched_, &overhead_patched_, &overhead_host_patched_, &overhead_kernels_patched_);
  overhead_full_ = overhead_full_ * forwards;
  overhead_host_full_ = overhead_host_full_ * forwards;
  overhead_patched_ = overhead_patched_ * forwards;
  overhead_host_patched_ = overhead_host_patched_ * forwards;
  overhead_kernels_full_.Scale(forwards);
  overhead_kernels_patched_.Scale(forwards);
}

const BlockCost& StageCosts::Block(int index, bool patched) const {
  const int f = static_cast<int>(model_.family_of(index));
  return patched ? patched_[f] : full_[f];
}

Bytes StageCosts::Activation(bool patched) const {
  const RankWork& w = Work(patched);
  return Bytes(kElementBytes * w.batch * static_cast<double>(w.img_tokens + w.txt_tokens) * model_.hidden);
}

Bytes StageCosts::Latent(bool patched) const {
  const RankWork& w = Work(patched);
  const double per_token = static_cast<double>(model_.latent_channels) * model_.patch_spatial *
                           model_.patch_spatial * model_.patch_temporal;
  return Bytes(kElementBytes * w.batch * static_cast<double>(w.img_tokens) * per_token);
}

BlockCost StageCosts::Cost(BlockFamily family, const RankWork& w, const ParallelConfig& config) const {
  BlockCost c;
  const Mechanisms& mech = compute_.mechanisms();
  // A temporal block attends over one spatial position's frames, which the sequence split
  // (by rows or tokens of every frame) leaves whole on each rank: its attention is local, with
  // no all-to-all and no ring.
  const bool sequence_parallel = family != BlockFamily::kTemporal;
  KernelBreakdown* kernels = kernel_breakdown_ ? &c.kernels : nullptr;
  const std::vector<OpCost> ops = BlockOps(model_, family, w);
  bool done = false;
  // The library's ring runs even for a Ring group of one, as xDiT ran when it published its
  // tables: its attention processors handed every sequence-parallel attention, Ulysses alone
  // included, to xFuserLongContextAttention (xfuser/model_executor/layers/
  // attention_processor.py until #607, "Deprecate Yunchang attention paths in favor of USP",
  // 2026-01-09), which calls its ring function (xdit-project/xDiT@175e0bf
  // xfuser/core/long_ctx_attention/hybrid/attn_layer.py `out = self.ring_attn_fn(query_layer,
  // key_layer, value_layer, ...)`), whose loop runs once over `range(comm.world_size)`
  // (ring/ring_flash_attn.py): the call's framework ops, and the partial output made fp32 by
  // the first update_out_and_lse and cast back at the end (`out = out.to(q.dtype)`). Since
  // #607 xDiT's USP() calls the attention directly for Ulysses alone (layers/usp.py), as did
  // the flux_usp_example.py behind its Flux H100 table (#365): for those this over-counts by
  // the ring call's ops. The ulysses_ops wrapper below is the same library's. ditune's engine
  // calls its attention directly. The other PyTorch runtimes' own Ulysses code (cache-dit's,
  // SGLang's, vLLM-Omni's) is not counted: they are priced on this path.
  const bool library_ring =
      sequence_parallel && (config.ring > 1 || (config.ulysses > 1 && compute_.runtime() != Runtime::kEngine));
  if (library_ring) {
    // Ring runs the attention as r blockwise kernels and merges their partial outputs
    // (fp32 output and log-sum-exp rescaling) after each.
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].name != "attn") continue;
      OpCost chunk = ops[i];
      chunk.flops = chunk.flops / config.ring;
      chunk.bytes = chunk.bytes / config.ring;
      const double q = static_cast<double>(w.ulysses) * static_cast<double>(w.img_tokens + w.txt_tokens);
      // The merge rescales the fp32 running output by the new log-sum-exp (`out = out -
      // sigmoid(block_lse - lse) * (out - block_out)` and the lse's update) and
      // Mechanisms::ring_merge_ops framework ops. As eager kernels, one per op: the block's
      // output cast to fp32 (2 bytes an element read, 4 written), the difference (8 read, 4
      // written), the scaling (4, 4), the subtraction (8, 4): about 38 bytes an element.
      // Fused (RuntimeSpec::ring_merge_fused: xDiT's ring library compiles the chain with
      // TorchScript): the fp32 output and the block's bf16 output read, the fp32 output
      // written, 10 bytes an element. A compiled run is priced on the eager count, as every
      // other op, and scaled by Mechanisms::compiled_device_scale. ditune's engine merges in
      // one kernel of its own, counted as its profiler counts it
      // (ProfilingKernels::MergeAttention: ten fp32 passes), so that its measured curve prices
      // it.
      const double merge_bytes = compute_.runtime() == Runtime::kEngine ? 10.0 * 4.0
                                 : ring_merge_fused_                     ? 4.0 + 2.0 + 4.0
                                                                         : 38.0;
      OpCost merge{"ring_merge", OpClass::kElementwise, Flops(0),
                   Bytes(merge_bytes * w.batch * q * w.heads * model_.head_dim), FrameworkOps(mech.ring_merge_ops)};
      merge.kernel = kernel_names::kAttentionMerge;
      std::vector<OpCost> expanded;
      for (int k = 0; k < config.ring; ++k) {
        expanded.push_back(chunk);
        if (k > 0) expanded.push_back(merge);
      }
      // Once per call, whatever the degree: Mechanisms::ring_call_ops framework ops around the
      // ring loop of the library xDiT runs (host only: ditune's own engine issues none), and
      // the library's casts of the output to fp32 and back (bf16 read, fp32 written, read,
      // bf16 written).
      expanded.push_back({"ring_call", OpClass::kElementwise, Flops(0), Bytes(0), FrameworkOps(mech.ring_call_ops), true});
      if (compute_.runtime() != Runtime::kEngine) {
        OpCost casts{"ring_out_casts", OpClass::kElementwise, Flops(0),
                     Bytes(12.0 * w.batch * q * w.heads * model_.head_dim), 0};
        casts.kernel = kernel_names::kAttentionMerge;
        expanded.push_back(casts);
      }
      Seconds device, host;
      for (const auto& op : expanded) {
        device += compute_.DeviceTime(op);
        host += compute_.HostTime(op);
        AddByKernel(op, compute_.DeviceTime(op), kernels);
      }
      Phases(compute_, ops, &c, kernel_breakdown_, &device, &host);
      done = true;
      break;
    }
  }
  if (!done) Phases(compute_, ops, &c, kernel_breakdown_);
  if (compute_.runtime() == Runtime::kCompiled) {
    c.pre = c.pre * mech.compiled_device_scale;
    c.attn = c.attn * mech.compiled_device_scale;
    c.post = c.post * mech.compiled_device_scale;
    c.kernels.Scale(mech.compiled_device_scale);
  }
  if (compute_.runtime() == Runtime::kEager) {
    // The block's own ops around its attention at the host time measured on the runtime's
    // block code where the model has it (ModelSpec::eager_host_ops: the counted ops scaled to
    // the measured total), else at the family's host scale over the counted ops.
    double k = family == BlockFamily::kJoint    ? mech.joint_host_scale
               : family == BlockFamily::kSingle ? mech.single_host_scale
                                                : mech.cross_host_scale;
    if (const double measured = model_.eager_host_ops.Of(family); measured > 0) {
      int counted = 0;
      for (const auto& op : ops) counted += op.kernels;
      if (counted > 0) k = measured / counted;
    }
    c.pre_host = c.pre_host * k;
    c.post_host = c.post_host * k;
  }
  if (config.pipefusion > 1) {
    // PipeFusion's attention writes the patch's fresh K and V into the stale full-sequence
    // buffer and reads it back: a copy of the patch's K/V and Mechanisms::pipefusion_patch_ops
    // framework ops.
    const double width = static_cast<double>(model_.hidden) / (config.tp * w.ulysses);
    OpCost kv{"kv_buffer", OpClass::kElementwise, Flops(0),
              Bytes(2.0 * 2.0 * kElementBytes * w.batch * static_cast<double>(w.img_tokens) * width),
              FrameworkOps(mech.pipefusion_patch_ops)};
    kv.kernel = kernel_names::kCopy;
    c.pre += compute_.DeviceTime(kv);
    c.pre_host += compute_.HostTime(kv);
    AddByKernel(kv, compute_.DeviceTime(kv), kernels);
  }
  // Tokens that take part in attention on this rank (text joins it in joint and single blocks).
  const double tokens = static_cast<double>(w.img_tokens) +
                        (AttendsOverText(family) ? static_cast<double>(w.txt_tokens) : 0.0);
  const double width = static_cast<double>(model_.hidden) / config.tp;
  const double qkv_one = kElementBytes * w.batch * tokens * width;  // one of Q, K, V on this rank
  const int rep = 0;  // rank 0 represents its groups: every group of a dimension is alike
  // ditune's own engine runs Ring without the library's wrapper: it permutes only for an
  // all-to-all.
  const bool usp_wrapper = config.ulysses > 1 || (config.ring > 1 && compute_.runtime() != Runtime::kEngine);
  if (usp_wrapper && sequence_parallel) {
    // Each all-to-all needs its tensor permuted into contiguous per-rank chunks before and
    // after: two memory-bound copies, and in an eager framework Mechanisms::ulysses_ops
    // framework ops (the sequence-parallel library xDiT uses: reshape, transpose, contiguous,
    // empty_like, the collective, reshape, transpose, contiguous, reshape: nine by count),
    // for Q, K, V and the output.
    // xDiT runs every sequence-parallel attention through that library's hybrid layer
    // (xFuserLongContextAttention: SeqAllToAll4D on Q, K, V, the ring, SeqAllToAll4D on the
    // output), Ring alone included: with a Ulysses group of one, yunchang's all_to_all_4D
    // skips only the collective and still makes both contiguous copies and the reshapes.
    const int a2a_ops = FrameworkOps(mech.ulysses_ops) - (config.ulysses > 1 ? 0 : 1);
    OpCost qkv_copies{"a2a_copies", OpClass::kElementwise, Flops(0), Bytes(2.0 * 2.0 * 3.0 * qkv_one), 3 * a2a_ops};
    OpCost out_copies{"a2a_copies", OpClass::kElementwise, Flops(0), Bytes(2.0 * 2.0 * qkv_one), a2a_ops};
    qkv_copies.kernel = out_copies.kernel = kernel_names::kCopy;
    c.pre += compute_.DeviceTime(qkv_copies);
    c.pre_host += compute_.HostTime(qkv_copies);
    c.post += compute_.DeviceTime(out_copies);
    c.post_host += compute_.HostTime(out_copies);
    AddByKernel(qkv_copies, compute_.DeviceTime(qkv_copies), kernels);
    AddByKernel(out_copies, compute_.DeviceTime(out_copies), kernels);
  }
  if (config.ulysses > 1 && sequence_parallel) {
    const auto group = layout_.GroupOf(rep, Axis::kUlysses);
    const double share = share_[static_cast<int>(Axis::kUlysses)];
    c.a2a_in = comm_.Time(Collective::kAllToAll, Bytes(qkv_one), group, share) * 3;
    c.a2a_out = comm_.Time(Collective::kAllToAll, Bytes(qkv_one), group, share);
  }
  if (config.ring > 1 && sequence_parallel) {
    // r - 1 passes of this rank's K and V (after Ulysses: u x tokens, heads / u) around the
    // ring, each overlapped with the attention over the block already held. Every rank sends
    // to the next at once and waits for its own block before the next step, so a pass takes
    // as long as the ring's slowest hop: on a PCIe box the one that crosses the sockets,
    // across nodes the one that leaves the node. Only the hops that leave a node or a socket
    // share their path with the other rings' (Sharing of the ring group).
    const auto group = layout_.GroupOf(rep, Axis::kRing);
    const double share = share_[static_cast<int>(Axis::kRing)];
    Seconds pass(0);
    for (size_t i = 0; i < group.size(); ++i) {
      const std::vector<int> hop = {group[i], group[(i + 1) % group.size()]};
      const double hop_share = comm_.TierOf(hop) == LinkTier::kIntra ? 1.0 : share;
      pass = std::max(pass, comm_.Time(Collective::kSendRecv, Bytes(2 * qkv_one), hop, hop_share));
    }
    const Seconds chunk = c.attn / config.ring;
    if (!comm_.PeerAccess()) {
      // Without peer access each pass is a copy staged through host memory, and it does not
      // hide behind the attention: on 4 RTX 4090s, Ulysses-2 x Ring-2 attention over 36,000
      // tokens (40 heads of 128) took 84.76 ms against Ulysses-4's 72.72, the Ring-2 half's
      // transfer on top of the same compute, and Ulysses-4 was faster at every length
      // measured (feifeibear/long-context-attention#88, 2024-10-14).
      c.ring_exposed = pass * (config.ring - 1);
    } else if (pass > chunk) {
      c.ring_exposed = (pass - chunk) * (config.ring - 1);
    }
  }
  if (config.tp > 1) {
    const auto group = layout_.GroupOf(rep, Axis::kTp);
    const double share = share_[static_cast<int>(Axis::kTp)];
    // Megatron's split: each residual branch ends in a row-parallel output projection, whose
    // partial sums are all-reduced over the TP group (PyTorch's RowwiseParallel returns its
    // output replicated). So a block all-reduces once per branch, each of that branch's
    // tokens: a cross-attention block three times over the image tokens (self-attention,
    // cross-attention, MLP; a temporal block has no cross-attention); a double-stream block
    // four times, each stream's attention and MLP on their own (cache-dit's Flux plans:
    // to_out, to_add_out, ff and ff_context row-parallel); a single-stream block once, its
    // proj_out over the concatenated attention and MLP (cache-dit's Flux single-block plan).
    // With cross-attention whole (xDiT's published TP), a cross-attention block all-reduces
    // twice: after self-attention and after the MLP.
    const double img = w.batch * static_cast<double>(w.img_tokens);
    const double txt = w.batch * static_cast<double>(w.txt_tokens);
    auto reduce = [&](double count) {
      return comm_.Time(Collective::kAllReduce, Bytes(kElementBytes * count * model_.hidden), group, share);
    };
    const int cross_reduces = tp_split_ == TpSplit::kCrossWhole ? 2 : 3;
    switch (family) {
      case BlockFamily::kJoint: c.tp = (reduce(img) + reduce(txt)) * 2; break;
      case BlockFamily::kSingle: c.tp = reduce(img + txt); break;
      case BlockFamily::kTemporal: c.tp = reduce(img) * 2; break;
      case BlockFamily::kCross:
      case BlockFamily::kSpatial: c.tp = reduce(img) * cross_reduces; break;
    }
  }
  if (config.fsdp > 1) {
    // FSDP gathers each block's weights from the fsdp ranks (consecutive ranks) one block
    // ahead, on its own stream: only what the block's compute does not cover is exposed.
    std::vector<int> group(static_cast<size_t>(config.fsdp));
    for (int r = 0; r < config.fsdp; ++r) group[static_cast<size_t>(r)] = r;
    const double share = static_cast<double>(layout_.world_size()) / config.fsdp;
    const double scale = model_.published_params > 0 ? model_.published_params / DitParams(model_) : 1.0;
    const Bytes weights(kElementBytes * BlockParams(model_, family) * scale / config.tp);
    const Seconds gather = comm_.Time(Collective::kAllGather, weights, group, share);
    if (gather > c.compute()) c.fsdp = gather - c.compute();
  }
  return c;
}

}  // namespace ditune
