#include "simulator/simulate.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/rank_share.h"
#include "simulator/stage_costs.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

// Everything at 1 TFLOP/s (1 TB/s for elementwise), no latencies, no host cost: times are
// sums a person can check.
ComputeModel FlatCompute(const GpuSpec& gpu) {
  ComputeModel m = ComputeModel::Defaults(gpu);
  for (OpClass c : {OpClass::kGemm, OpClass::kAttention, OpClass::kLinearAttention, OpClass::kElementwise}) {
    m.SetFit(c, PiecewiseLatencyModel({{1, 1e30, 0.0, 1e12}}));
  }
  m.set_launch_overhead(Seconds(0));
  return m;
}

void FreeComm(CommModel* comm) {
  for (Collective c : {Collective::kAllToAll, Collective::kAllGather, Collective::kAllReduce, Collective::kSendRecv}) {
    for (LinkTier t : {LinkTier::kIntra, LinkTier::kCrossSocket, LinkTier::kInterNode}) {
      comm->SetFit(c, t, PiecewiseLatencyModel({{1, 1e30, 0.0, 1e30}}));
    }
  }
}

struct Fixture {
  Fixture(const char* model_id, const char* gpu, int gpus, const char* spec, int h, int w, int steps,
          OutputType out = OutputType::kLatent, int frames = 1)
      : cluster(*ResolveCluster({gpu, gpus}, Cat())),
        compute(ComputeModel::Defaults(*cluster.gpu)),
        comm(cluster) {
    model = *Cat().Model(model_id);
    workload = {model_id, h, w, frames, steps, 1, out};
    config = *ParseParallelConfig(spec);
  }
  SimInput Input() { return {model, workload, &cluster, config, &compute, &comm}; }
  const ModelSpec* model;
  Workload workload;
  Cluster cluster;
  ParallelConfig config;
  ComputeModel compute;
  CommModel comm;
};

double SumSeconds(const ComputeModel& cm, const std::vector<OpCost>& ops) {
  double s = 0;
  for (const auto& op : ops) s += cm.DeviceTime(op).value();
  return s;
}

TEST(SimulateTest, GoldenSingleDevice) {
  Fixture f("pixart-alpha", "a100-sxm4-80gb", 1, "", 1024, 1024, 20);
  f.compute = FlatCompute(*f.cluster.gpu);
  auto r = Simulate(f.Input());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  const RankWork w = ComputeRankWork(*f.model, t, f.workload, f.config);
  // One step: 28 identical blocks plus the embeddings, at 1e12 FLOP/s (bytes/s).
  const double step = 28 * SumSeconds(f.compute, BlockOps(*f.model, BlockFamily::kCross, w)) +
                      SumSeconds(f.compute, StepOverheadOps(*f.model, w));
  EXPECT_NEAR(r->step.value(), step, 1e-12 * step);
  EXPECT_NEAR(r->dit.value(), 20 * step, 1e-9 * step);
  EXPECT_EQ(r->vae_decode.value(), 0.0);  // latent output
  EXPECT_NEAR(r->total.value(), r->text_encode.value() + r->dit.value(), 1e-12);
  EXPECT_EQ(r->steady.exposed_comm.value(), 0.0);
  EXPECT_EQ(r->ranks.size(), 1u);
}

TEST(SimulateTest, GoldenUlysses) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 4, "ulysses=4", 1024, 1024, 28);
  f.compute = FlatCompute(*f.cluster.gpu);
  auto r = Simulate(f.Input());
  ASSERT_TRUE(r.ok());
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  // Synchronous: each block's compute plus its four all-to-alls, in sequence.
  double step = costs.Overhead(false).value();
  for (int i = 0; i < f.model->num_blocks(); ++i) step += costs.Block(i, false).total().value();
  EXPECT_NEAR(r->step.value(), step, 1e-9 * step);
  // The all-to-all of Q (one of the three before attention) over 4 NVLink ranks, by hand:
  // 3072 / 1 width x (1024 image + 128 text tokens) x 2 bytes, bus factor 3/4.
  const LinkSpec& nv = **Cat().Link("nvlink4");
  const double q = 2.0 * 3072 * (1024 + 128);
  const double a2a = nv.latency.value() + q * 0.75 / nv.busbw.value();
  EXPECT_NEAR(costs.Block(0, false).a2a_in.value(), 3 * a2a, 1e-15);
  EXPECT_NEAR(costs.Block(0, false).a2a_out.value(), a2a, 1e-15);
  EXPECT_NEAR(r->steady.exposed_comm.value(), 57 * 4 * a2a, 1e-9);
}

// Tensor parallelism all-reduces once per residual branch: a double-stream block four times
// (each stream's attention and MLP), a single-stream block once; a cross-attention block
// three times, or twice where cross-attention stays whole (xDiT's published TP), whose
// cross-attention is then not split either.
TEST(SimulateTest, GoldenTensorParallelAllReducesPerBranch) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 2, "tp=2", 1024, 1024, 28);
  f.compute = FlatCompute(*f.cluster.gpu);
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  const LinkSpec& nv = **Cat().Link("nvlink4");
  // All-reduce of n tokens x 3072 x 2 bytes over 2 ranks: bus factor 2 (n - 1) / n = 1.
  auto reduce = [&](double tokens) { return nv.latency.value() + 2.0 * 3072 * tokens / nv.busbw.value(); };
  int joint = -1, single = -1;
  for (int i = 0; i < f.model->num_blocks(); ++i) {
    (f.model->family_of(i) == BlockFamily::kJoint ? joint : single) = i;
  }
  ASSERT_GE(joint, 0);
  ASSERT_GE(single, 0);
  EXPECT_NEAR(costs.Block(joint, false).tp.value(), 2 * (reduce(4096) + reduce(512)), 1e-12);
  EXPECT_NEAR(costs.Block(single, false).tp.value(), reduce(4096 + 512), 1e-12);

  Fixture p("pixart-alpha", "h100-sxm5-80gb", 2, "tp=2", 1024, 1024, 20);
  p.compute = FlatCompute(*p.cluster.gpu);
  const TokenGeometry pt = *ComputeTokenGeometry(*p.model, p.workload);
  StageCosts megatron(*p.model, pt, p.workload, p.config, layout, p.compute, p.comm);
  StageCosts whole(*p.model, pt, p.workload, p.config, layout, p.compute, p.comm, false, TpSplit::kCrossWhole);
  auto preduce = [&](double tokens) { return nv.latency.value() + 2.0 * 1152 * tokens / nv.busbw.value(); };
  // Guidance runs both branches on every rank: a batch of two.
  EXPECT_NEAR(megatron.Block(0, false).tp.value(), 3 * preduce(2 * 4096), 1e-12);
  EXPECT_NEAR(whole.Block(0, false).tp.value(), 2 * preduce(2 * 4096), 1e-12);
  // Cross-attention whole: its projections are the full width on every rank.
  const RankWork split = ComputeRankWork(*p.model, pt, p.workload, p.config);
  const RankWork kept = ComputeRankWork(*p.model, pt, p.workload, p.config, TpSplit::kCrossWhole);
  auto flops_of = [&](const RankWork& w, const std::string& name) {
    for (const auto& op : BlockOps(*p.model, BlockFamily::kCross, w)) {
      if (op.name == name) return op.flops.value();
    }
    return -1.0;
  };
  EXPECT_NEAR(flops_of(kept, "cross_q"), 2 * flops_of(split, "cross_q"), 1e-6);
  EXPECT_NEAR(flops_of(kept, "qkv"), flops_of(split, "qkv"), 1e-6);
  EXPECT_NEAR(flops_of(kept, "mlp_up"), flops_of(split, "mlp_up"), 1e-6);
}

// xDiT's Ring goes through the same hybrid layer as Ulysses: with a Ulysses group of one,
// yunchang's all_to_all_4D skips the collective but still permutes Q, K, V and the output
// into contiguous copies, around Mechanisms::ulysses_ops - 1 framework ops each. ditune's own
// engine runs Ring without that wrapper.
TEST(SimulateTest, GoldenRingPaysTheUlyssesWrapper) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 2, "ring=2", 1024, 1024, 28);
  // The block's counted ops as they stand (its measured host ops would scale them: another test).
  ModelSpec counted = *f.model;
  counted.eager_host_ops = {};
  f.model = &counted;
  f.compute = FlatCompute(*f.cluster.gpu);
  const double op_s = 10e-6;
  f.compute.set_launch_overhead(Seconds(op_s));
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  const RankWork w = ComputeRankWork(*f.model, t, f.workload, f.config);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  const Mechanisms& m = f.compute.mechanisms();
  // The single block's ops, its attention as two chunks (one framework op each), one merge
  // and the ring call's own ops, then the wrapper: 4 x (ulysses_ops - 1) ops.
  double ops = 0, other_device = 0;
  for (const auto& op : BlockOps(*f.model, BlockFamily::kSingle, w)) {
    ops += op.name == "attn" ? 2 : op.kernels;
    if (op.name != "attn") other_device += f.compute.DeviceTime(op).value();
  }
  ops += std::lround(m.ring_merge_ops) + std::lround(m.ring_call_ops) + 4 * (std::lround(m.ulysses_ops) - 1);
  const BlockCost& b = costs.Block(f.model->num_blocks() - 1, false);
  EXPECT_NEAR((b.pre_host + b.attn_host + b.post_host).value(), ops * op_s, 1e-12);
  // Device: two copies (read and write) of Q, K, V and the output, at 1e12 bytes/s.
  const double qkv_one = 2.0 * (2048 + 256) * 3072;
  EXPECT_NEAR((b.pre + b.post).value() - other_device, 2 * 2 * 4 * qkv_one / 1e12, 1e-12);
  EXPECT_EQ(b.a2a_in.value() + b.a2a_out.value(), 0.0);  // no collective
  // The engine: neither the copies nor their ops.
  f.compute.SetRuntime(Runtime::kEngine);
  StageCosts engine(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  EXPECT_NEAR((engine.Block(f.model->num_blocks() - 1, false).pre + engine.Block(f.model->num_blocks() - 1, false).post)
                  .value(),
              other_device, 1e-12);
  // Nor the ring call's ops: the engine issues the two chunks and the merge, one launch each.
  EXPECT_NEAR(engine.Block(f.model->num_blocks() - 1, false).attn_host.value(),
              3 * f.compute.launch_overhead().value(), 1e-15);
}

// Without peer access (GeForce) each Ring pass is a copy staged through host memory that does
// not hide behind the attention (long-context-attention #88 on 4 RTX 4090s): the whole pass is
// exposed, where with peer access only what the attention chunk does not cover is.
TEST(SimulateTest, RingPassesWithoutPeerAccessAreNotHidden) {
  Fixture f("wan2.1-14b", "rtx4090-24gb", 4, "ring=4", 480, 832, 50, OutputType::kLatent, 81);
  ASSERT_FALSE(f.cluster.gpu->peer_access);
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts staged(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  const BlockCost& b = staged.Block(0, false);
  // The same box with peer access: the GPU entry copied with it turned on.
  GpuSpec peer = *f.cluster.gpu;
  peer.peer_access = true;
  Cluster with_peer = f.cluster;
  with_peer.gpu = &peer;
  CommModel comm_peer(with_peer);
  StageCosts direct(*f.model, t, f.workload, f.config, layout, f.compute, comm_peer);
  const BlockCost& d = direct.Block(0, false);
  ASSERT_GT(b.ring_exposed.value(), 0.0);
  EXPECT_GT(b.ring_exposed.value(), d.ring_exposed.value());
  // Exposed in full: three passes of this rank's K and V (bf16) over the link.
  const RankWork w = ComputeRankWork(*f.model, t, f.workload, f.config);
  const auto group = layout.GroupOf(0, Axis::kRing);
  const double kv = 2.0 * 2.0 * w.batch * static_cast<double>(w.img_tokens) * f.model->hidden;
  const Seconds pass = f.comm.Time(Collective::kSendRecv, Bytes(kv), {group[0], group[1]});
  EXPECT_NEAR(b.ring_exposed.value(), 3 * pass.value(), 1e-9);
}

// Every rank of a ring waits for its predecessor's block before its next step, so a pass
// takes as long as the slowest hop: over two nodes the two that leave a node, not the NVLink
// hop between ranks 0 and 1.
TEST(SimulateTest, RingPassRunsAtItsSlowestHop) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 16, 8, 2, "nvlink4", "eth-25g"}, Cat());
  const ModelSpec& model = **Cat().Model("pixart-alpha");
  const Workload workload{"pixart-alpha", 2048, 2048, 1, 20, 1, OutputType::kLatent};
  const ParallelConfig config = *ParseParallelConfig("ring=16");
  ComputeModel compute = ComputeModel::Defaults(*cluster.gpu);
  CommModel comm(cluster);
  const TokenGeometry t = *ComputeTokenGeometry(model, workload);
  auto layout = *RankLayout::Create(config, 8);
  StageCosts costs(model, t, workload, config, layout, compute, comm);
  const BlockCost& b = costs.Block(0, false);
  const RankWork w = ComputeRankWork(model, t, workload, config);
  const double kv = 2.0 * 2.0 * w.batch * static_cast<double>(w.img_tokens) * model.hidden;
  const Seconds across = comm.Time(Collective::kSendRecv, Bytes(kv), {7, 8});
  const Seconds inside = comm.Time(Collective::kSendRecv, Bytes(kv), {0, 1});
  ASSERT_GT(across.value(), 2 * inside.value());
  // Fifteen passes, each exposed by what its share of the block's attention (sixteen chunks
  // and their merges) does not cover.
  const double chunk = b.attn.value() / 16;
  ASSERT_GT(across.value(), chunk);
  EXPECT_NEAR(b.ring_exposed.value(), 15 * (across.value() - chunk), 1e-12);
  EXPECT_GT(b.ring_exposed.value(), 15 * std::max(0.0, inside.value() - chunk) + 1e-3);
}

// xDiT's ring library merges each block's partial output in one TorchScript-fused kernel (10
// bytes an element: the fp32 output and the bf16 block read, the fp32 output written); a
// runtime whose merge runs eagerly moves about 38 (five kernels). Host time is the same.
TEST(SimulateTest, FusedRingMergeMovesTenBytesAnElement) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 4, "ring=4", 1024, 1024, 28);
  f.compute = FlatCompute(*f.cluster.gpu);
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  const RankWork w = ComputeRankWork(*f.model, t, f.workload, f.config);
  auto layout = *RankLayout::Create(f.config, 8);
  auto block = [&](bool fused) {
    StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm, false, TpSplit::kMegatron, 1, fused);
    return costs.Block(0, false);
  };
  const BlockCost eager = block(false), fused = block(true);
  // Three merges over this rank's queries (a quarter of the image and the text) and every
  // head, at FlatCompute's 1e12 bytes/s.
  const double q = static_cast<double>(w.img_tokens + w.txt_tokens);
  const double values = w.batch * q * w.heads * f.model->head_dim;
  EXPECT_NEAR(eager.attn.value() - fused.attn.value(), 3 * (38.0 - 10.0) * values / 1e12, 1e-12);
  EXPECT_EQ(eager.attn_host.value(), fused.attn_host.value());
}

// xDiT hands every sequence-parallel attention to its ring function, Ulysses alone included
// (a Ring group of one): each call pays the ring call's own ops on the host and the output's
// casts to fp32 and back on the device. Without sequence parallelism, and in ditune's engine,
// nothing of it.
TEST(SimulateTest, UlyssesAloneRunsTheLibrarysRingOnce) {
  auto attn = [](const char* spec, int gpus, double ring_call_ops, Runtime runtime) {
    Fixture f("flux.1-dev", "h100-sxm5-80gb", gpus, spec, 1024, 1024, 28);
    f.compute = FlatCompute(*f.cluster.gpu);
    Mechanisms m = f.compute.mechanisms();
    m.ring_call_ops = ring_call_ops;
    f.compute.SetMechanisms(m);
    f.compute.SetRuntime(runtime);
    f.compute.set_launch_overhead(Seconds(10e-6));
    const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
    auto layout = *RankLayout::Create(f.config, 8);
    StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
    const BlockCost& b = costs.Block(0, false);
    return std::pair{b.attn_host.value(), b.attn.value()};
  };
  const auto [host16, device16] = attn("ulysses=2", 2, 16, Runtime::kEager);
  const auto [host0, device0] = attn("ulysses=2", 2, 0, Runtime::kEager);
  EXPECT_NEAR(host16 - host0, 16 * 10e-6, 1e-12);
  EXPECT_EQ(device16, device0);
  // The casts: 12 bytes per output value (bf16 to fp32 and back) over the gathered sequence
  // and this rank's heads, at FlatCompute's 1e12 bytes/s.
  const ModelSpec& flux = **Cat().Model("flux.1-dev");
  const double tokens = 4096 + flux.text_tokens;
  const auto [host_e, device_e] = attn("ulysses=2", 2, 16, Runtime::kEngine);
  EXPECT_NEAR(device16 - device_e, 12.0 * tokens * flux.heads / 2 * flux.head_dim / 1e12, 1e-9);
  EXPECT_EQ(host_e, host0);  // the attention alone
  const auto [host1, device1] = attn("", 1, 16, Runtime::kEager);
  const auto [host1z, device1z] = attn("", 1, 0, Runtime::kEager);
  EXPECT_EQ(host1, host1z);
  EXPECT_EQ(device1, device1z);
}

// The eager host time of a block's own ops is its family's where the model carries no
// measured figure (tiny-flux): Mechanisms' per-family scales multiply what the block's counted
// ops cost on the host, around its attention; the attention call and the methods' own ops (the
// Ulysses wrapper) keep their counts, and under torch.compile or in ditune's engine no scale
// applies.
TEST(SimulateTest, GoldenBlockHostTimeIsItsFamilys) {
  Fixture f("tiny-flux", "h100-sxm5-80gb", 2, "ulysses=2", 1024, 1024, 28);
  ASSERT_EQ(f.model->eager_host_ops.Of(BlockFamily::kJoint), 0);
  f.compute = FlatCompute(*f.cluster.gpu);
  f.compute.set_launch_overhead(Seconds(10e-6));
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  const int joint = 0, single = f.model->num_blocks() - 1;
  ASSERT_EQ(f.model->family_of(joint), BlockFamily::kJoint);
  ASSERT_EQ(f.model->family_of(single), BlockFamily::kSingle);
  StageCosts base(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  Mechanisms m = f.compute.mechanisms();
  m.joint_host_scale = 2;
  m.single_host_scale = 3;
  m.cross_host_scale = 5;  // no cross-attention block in Flux: changes nothing here
  ComputeModel scaled = f.compute;
  scaled.SetMechanisms(m);
  scaled.set_launch_overhead(Seconds(10e-6));
  StageCosts s(*f.model, t, f.workload, f.config, layout, scaled, f.comm);
  // The wrapper's ops around the all-to-alls (3 before attention, 1 after) are not the block's.
  const double wrap = std::lround(m.ulysses_ops) * 10e-6;
  for (auto [block, k] : {std::pair{joint, 2.0}, std::pair{single, 3.0}}) {
    const BlockCost& b0 = base.Block(block, false);
    const BlockCost& b1 = s.Block(block, false);
    EXPECT_NEAR(b1.pre_host.value() - 3 * wrap, k * (b0.pre_host.value() - 3 * wrap), 1e-12) << block;
    EXPECT_NEAR(b1.post_host.value() - wrap, k * (b0.post_host.value() - wrap), 1e-12) << block;
    EXPECT_EQ(b1.attn_host.value(), b0.attn_host.value());
    EXPECT_EQ(b1.pre.value(), b0.pre.value());  // device time: untouched
  }
  scaled.SetRuntime(Runtime::kCompiled);
  ComputeModel compiled = f.compute;
  compiled.SetRuntime(Runtime::kCompiled);
  StageCosts c0(*f.model, t, f.workload, f.config, layout, compiled, f.comm);
  StageCosts c1(*f.model, t, f.workload, f.config, layout, scaled, f.comm);
  EXPECT_EQ(c1.Block(joint, false).pre_host.value(), c0.Block(joint, false).pre_host.value());
}

// Where the model carries the ATen ops its block code dispatches (ModelSpec::eager_host_ops,
// counted on diffusers' blocks), a block's own host time is that many ops, whatever the
// family's scale: the counted ops are scaled to the measured total, and the Ulysses wrapper's
// ops stay the method's.
TEST(SimulateTest, MeasuredBlockHostTimeIsTheModelsOwn) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 2, "ulysses=2", 1024, 1024, 28);
  const double joint_ops = f.model->eager_host_ops.Of(BlockFamily::kJoint);
  const double single_ops = f.model->eager_host_ops.Of(BlockFamily::kSingle);
  ASSERT_GT(joint_ops, 0);
  ASSERT_GT(single_ops, 0);
  f.compute = FlatCompute(*f.cluster.gpu);
  const double op_s = 10e-6;
  f.compute.set_launch_overhead(Seconds(op_s));
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts base(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  Mechanisms m = f.compute.mechanisms();
  m.joint_host_scale = 3;
  m.single_host_scale = 0.5;
  ComputeModel scaled = f.compute;
  scaled.SetMechanisms(m);
  scaled.set_launch_overhead(Seconds(op_s));
  StageCosts s(*f.model, t, f.workload, f.config, layout, scaled, f.comm);
  const double wrap = std::lround(m.ulysses_ops) * op_s;
  // xDiT's attention goes through its ring function even with a Ring group of one: the
  // call's own ops (StageCosts::Cost).
  const double ring_call = std::lround(m.ring_call_ops) * op_s;
  const int joint = 0, single = f.model->num_blocks() - 1;
  for (auto [block, ops] : {std::pair{joint, joint_ops}, std::pair{single, single_ops}}) {
    const BlockCost& b0 = base.Block(block, false);
    const BlockCost& b1 = s.Block(block, false);
    EXPECT_EQ(b1.pre_host.value(), b0.pre_host.value()) << block;  // the family scale: not applied
    EXPECT_EQ(b1.post_host.value(), b0.post_host.value()) << block;
    // The block's own ops, the attention call included: the measured count (the attention
    // call is one op of the counted ones, kept at one).
    const double own =
        (b0.pre_host.value() - 3 * wrap) + (b0.attn_host.value() - ring_call) + (b0.post_host.value() - wrap);
    EXPECT_NEAR(own / op_s, ops, 1.0) << block;
  }
}

// Where the model carries the ATen ops its code dispatches outside the blocks and in one
// scheduler step (ModelSpec::step_host_ops, counted on diffusers' transformer and scheduler),
// an eager forward's own host time outside the blocks is that many ops and the scheduler step
// that many more; without them the hand-counted kernels and no scheduler. torch.compile fuses
// the forward, not the scheduler; ditune's engine issues neither.
TEST(SimulateTest, MeasuredStepHostOpsAreTheModelsOwn) {
  Fixture f("pixart-alpha", "a100-sxm4-80gb", 1, "", 1024, 1024, 20);
  ASSERT_GT(f.model->step_host_ops.outside, 0);
  ASSERT_GT(f.model->step_host_ops.scheduler, 0);
  f.compute = FlatCompute(*f.cluster.gpu);
  const double op_s = 10e-6;
  f.compute.set_launch_overhead(Seconds(op_s));
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  const RankWork w = ComputeRankWork(*f.model, t, f.workload, f.config);
  auto layout = *RankLayout::Create(f.config, 8);
  ModelSpec uncounted = *f.model;
  uncounted.step_host_ops = {};
  StageCosts measured(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  StageCosts hand(uncounted, t, f.workload, f.config, layout, f.compute, f.comm);
  int kernels = 0;
  for (const auto& op : StepOverheadOps(*f.model, w)) kernels += op.kernels;
  EXPECT_NEAR(measured.OverheadHost(false).value(), f.model->step_host_ops.outside * op_s, 1e-12);
  EXPECT_NEAR(hand.OverheadHost(false).value(), kernels * op_s, 1e-12);
  EXPECT_EQ(measured.Overhead(false).value(), hand.Overhead(false).value());  // device: untouched
  EXPECT_NEAR(measured.SchedulerHost().value(), f.model->step_host_ops.scheduler * op_s, 1e-12);
  EXPECT_EQ(hand.SchedulerHost().value(), 0.0);
  ComputeModel compiled = f.compute;
  compiled.SetRuntime(Runtime::kCompiled);
  StageCosts c(*f.model, t, f.workload, f.config, layout, compiled, f.comm);
  StageCosts ch(uncounted, t, f.workload, f.config, layout, compiled, f.comm);
  EXPECT_EQ(c.OverheadHost(false).value(), ch.OverheadHost(false).value());
  EXPECT_NEAR(c.SchedulerHost().value(), f.model->step_host_ops.scheduler * compiled.mechanisms().eager_op_us * 1e-6,
              1e-12);
  ComputeModel engine = f.compute;
  engine.SetRuntime(Runtime::kEngine);
  EXPECT_EQ(StageCosts(*f.model, t, f.workload, f.config, layout, engine, f.comm).SchedulerHost().value(), 0.0);
}

// The scheduler's host ops are paid once per step on one device, and under PipeFusion once
// per patch on the last stage (xDiT's _async_pipeline steps each patch's latents as it leaves
// the last stage). With a scheduler far slower than everything else, a steady step is that
// many scheduler steps.
TEST(SimulateTest, SchedulerStepsEveryPatchUnderPipeFusion) {
  for (const char* spec : {"", "pipefusion=2,patches=4"}) {
    const int gpus = spec[0] == '\0' ? 1 : 2;
    Fixture f("pixart-alpha", "a100-sxm4-80gb", gpus, spec, 256, 256, 12);
    f.compute = FlatCompute(*f.cluster.gpu);
    FreeComm(&f.comm);
    const double op_s = 1e-3;
    f.compute.set_launch_overhead(Seconds(op_s));
    ModelSpec slow = *f.model;
    slow.step_host_ops.scheduler = 1e5;  // 100 s of host a scheduler step
    SimInput in = f.Input();
    in.model = &slow;
    auto r = Simulate(in);
    ASSERT_TRUE(r.ok()) << spec;
    const int per_step = f.config.pipefusion > 1 ? f.config.patches : 1;
    const double expected = 1e5 * op_s * per_step;
    EXPECT_NEAR(r->step.value(), expected, 0.03 * expected) << spec;
    // The latent waits for its scheduler step: the loop is at least every step's.
    EXPECT_GE(r->dit.value(), (12 - f.config.warmup) * expected) << spec;
  }
}

// xDiT's PipeFusion runs every patch's forward with the whole text (its SD3 and Flux wrappers
// compute the text stream in each patch; cross-attention projects the text's K/V in each);
// ditune's engine carries the text with the first patch only, so a patch there holds a share.
TEST(SimulateTest, XditPipeFusionCarriesTheWholeTextEveryPatch) {
  Fixture f("sd3-medium", "a100-sxm4-80gb", 2, "pipefusion=2,patches=4", 1024, 1024, 20);
  f.compute = FlatCompute(*f.cluster.gpu);
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts xdit(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  ASSERT_GT(xdit.Work(false).txt_tokens, 0);
  EXPECT_EQ(xdit.Work(true).txt_tokens, xdit.Work(false).txt_tokens);
  EXPECT_TRUE(xdit.Work(true).text_each_patch);
  ComputeModel engine = f.compute;
  engine.SetRuntime(Runtime::kEngine);
  StageCosts own(*f.model, t, f.workload, f.config, layout, engine, f.comm);
  EXPECT_EQ(own.Work(true).txt_tokens, (xdit.Work(false).txt_tokens + 3) / 4);
  EXPECT_FALSE(own.Work(true).text_each_patch);
  // The joint block's device work per patch: the image quarter plus the whole text, against a
  // quarter of both.
  EXPECT_GT(xdit.Block(0, true).compute().value(), 1.2 * own.Block(0, true).compute().value());
  // Cross-attention blocks project the whole text's K/V in every patch.
  RankWork w = own.Work(true);
  auto cross_kv = [&](const RankWork& rw) {
    for (const auto& op : BlockOps(**Cat().Model("pixart-alpha"), BlockFamily::kCross, rw)) {
      if (op.name == "cross_kv") return op.flops.value();
    }
    return -1.0;
  };
  RankWork whole = w;
  whole.text_each_patch = true;
  EXPECT_NEAR(cross_kv(whole), 4 * cross_kv(w), 1e-6 * cross_kv(whole));
}

// A runtime that runs the guidance branches one after the other (cfg_sequential: diffusers'
// and vLLM-Omni's Qwen-Image, Wan's pipelines) pays two forwards of batch one a step: twice
// the host's ops and the collectives' fixed costs, a little more device time. CFG parallel
// (one branch per rank) runs one forward.
TEST(SimulateTest, SequentialGuidanceBranchesCostTwoForwards) {
  Fixture f("qwen-image", "h100-sxm5-80gb", 4, "ulysses=4", 1024, 1024, 20);
  RuntimeMemory place;
  EXPECT_EQ(SequentialForwards(*f.model, f.config, place), 1);
  place.cfg_sequential = true;
  EXPECT_EQ(SequentialForwards(*f.model, f.config, place), 2);
  EXPECT_EQ(SequentialForwards(*f.model, *ParseParallelConfig("cfg=2,ulysses=2"), place), 1);
  EXPECT_EQ(SequentialForwards(**Cat().Model("flux.1-dev"), f.config, place), 1);  // no CFG
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts batched(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  StageCosts seq(*f.model, t, f.workload, f.config, layout, f.compute, f.comm, false, TpSplit::kMegatron, 2);
  const BlockCost& b1 = batched.Block(0, false);
  const BlockCost& b2 = seq.Block(0, false);
  EXPECT_NEAR(b2.pre_host.value(), 2 * b1.pre_host.value(), 1e-12);
  EXPECT_NEAR(b2.post_host.value(), 2 * b1.post_host.value(), 1e-12);
  EXPECT_GT(b2.a2a_in.value(), b1.a2a_in.value());  // four all-to-alls of half the bytes, twice
  // The same FLOPs in GEMMs of half the rows: no less device time, and less than half again.
  EXPECT_GE(b2.compute().value(), b1.compute().value());
  EXPECT_LT(b2.compute().value(), 1.5 * b1.compute().value());
  // And in the whole run: a slower step where the host bounds it, never a faster one.
  SimOptions opt;
  opt.memory.placement = place;
  auto r_seq = Simulate(f.Input(), opt);
  auto r_batched = Simulate(f.Input(), SimOptions{});
  ASSERT_TRUE(r_seq.ok() && r_batched.ok());
  EXPECT_GT(r_seq->dit.value(), r_batched->dit.value());
}

// Under torch.compile a block's device time is the eager one times
// Mechanisms::compiled_device_scale; the Ulysses all-to-alls are not the compiler's.
TEST(SimulateTest, GoldenCompiledDeviceTimeIsTheEagerOnesScaled) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 2, "ulysses=2", 1024, 1024, 28);
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  Mechanisms m = f.compute.mechanisms();
  m.compiled_device_scale = 0.5;
  f.compute.SetMechanisms(m);
  StageCosts eager(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  ComputeModel compiled = f.compute;
  compiled.SetRuntime(Runtime::kCompiled);
  StageCosts c(*f.model, t, f.workload, f.config, layout, compiled, f.comm);
  // The wrapper's copies around the all-to-alls, as the engine prices memory copies.
  const RankWork w = ComputeRankWork(*f.model, t, f.workload, f.config);
  const double qkv_one = 2.0 * w.batch * (w.img_tokens + w.txt_tokens) * f.model->hidden;
  const OpCost in{"a2a_copies", OpClass::kElementwise, Flops(0), Bytes(2.0 * 2.0 * 3.0 * qkv_one), 1};
  const OpCost out{"a2a_copies", OpClass::kElementwise, Flops(0), Bytes(2.0 * 2.0 * qkv_one), 1};
  const double copy_in = f.compute.DeviceTime(in).value(), copy_out = f.compute.DeviceTime(out).value();
  const BlockCost& e = eager.Block(0, false);
  const BlockCost& k = c.Block(0, false);
  EXPECT_NEAR(k.attn.value(), 0.5 * e.attn.value(), 1e-15);
  EXPECT_NEAR(k.pre.value() - copy_in, 0.5 * (e.pre.value() - copy_in), 1e-12);
  EXPECT_NEAR(k.post.value() - copy_out, 0.5 * (e.post.value() - copy_out), 1e-12);
  EXPECT_EQ(k.a2a_in.value(), e.a2a_in.value());
  // The per-kernel breakdown follows.
  auto sum = [](const KernelBreakdown& b) {
    double total = 0;
    for (Seconds s : b.by_class) total += s.value();
    return total;
  };
  StageCosts eb(*f.model, t, f.workload, f.config, layout, f.compute, f.comm, true);
  StageCosts cb(*f.model, t, f.workload, f.config, layout, compiled, f.comm, true);
  const double copies = copy_in + copy_out;
  EXPECT_NEAR(sum(cb.Block(0, false).kernels) - copies, 0.5 * (sum(eb.Block(0, false).kernels) - copies), 1e-12);
}

TEST(SimulateTest, GoldenPipeline) {
  // PipeFusion without communication cost or warm-up: stage s takes c_s per patch; with
  // M >= N patches the pipeline never starves, so S steps take S x M x c0 plus the other
  // stages' one-patch drain (stage 0, with the embeddings, is the slowest).
  Fixture f("pixart-alpha", "a100-sxm4-80gb", 4, "pipefusion=4,patches=4,warmup=0", 1024, 1024, 10);
  f.compute = FlatCompute(*f.cluster.gpu);
  FreeComm(&f.comm);
  auto r = Simulate(f.Input());
  ASSERT_TRUE(r.ok());
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  const double c = 7 * costs.Block(0, true).total().value();
  const double c0 = c + costs.Overhead(true).value();
  EXPECT_NEAR(r->dit.value(), 10 * 4 * c0 + 3 * c, 1e-9 * r->dit.value());
  EXPECT_EQ(r->warmup.value(), 0.0);
  EXPECT_GT(r->imbalance, 0.0);  // stage 0 carries the embeddings
}

// xDiT's PipeFusion takes a received patch with a NCCL request's wait(): the device stream
// waits for the transfer, the host does not. A host-bound stage therefore issues its
// patches back to back, step after step, and the loop takes what stage 0's host needs to
// issue them plus the last patch's device time through the stages. A host that waited for
// each patch to arrive would also wait, every step, for each latent's round trip through
// the stages (host issue and device time at each stage), longer than its own issue here.
TEST(SimulateTest, GoldenPipelineHostNeverWaitsForAPatch) {
  Fixture f("pixart-alpha", "l40-48gb", 4, "pipefusion=4,patches=4,warmup=0", 1024, 1024, 10);
  f.compute = FlatCompute(*f.cluster.gpu);
  for (OpClass c : {OpClass::kGemm, OpClass::kAttention, OpClass::kLinearAttention, OpClass::kElementwise}) {
    f.compute.SetFit(c, PiecewiseLatencyModel({{1, 1e30, 0.0, 2e15}}));
  }
  f.compute.set_launch_overhead(Seconds(10e-6));  // eager: 10 µs a framework op
  FreeComm(&f.comm);
  SimOptions full;
  full.extrapolate = false;
  auto r = Simulate(f.Input(), full);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TokenGeometry t = *ComputeTokenGeometry(*f.model, f.workload);
  auto layout = *RankLayout::Create(f.config, 8);
  StageCosts costs(*f.model, t, f.workload, f.config, layout, f.compute, f.comm);
  const BlockCost& b = costs.Block(0, true);
  const double host = 7 * (b.pre_host + b.attn_host + b.post_host).value();  // one patch, 7 blocks
  const double device = 7 * b.total().value();
  const double h0 = host + costs.OverheadHost(true).value();
  const double d0 = device + costs.Overhead(true).value();
  ASSERT_GT(host, 2 * device);  // host-bound: the stages' devices wait for their hosts
  // Stage 0's host issues 10 steps x 4 patches; the last one then runs on the four devices.
  EXPECT_NEAR(r->dit.value(), 10 * 4 * h0 + d0 + 3 * device, 1e-9 * r->dit.value());
  // The round trip a waiting host would add every step: 4 x (host + device) > 4 x host.
  EXPECT_LT(r->dit.value(), 10 * 4 * (h0 + device));
}

// Where the patches travel slowly, a host that waited for each received patch would start
// issuing only once it arrived; xDiT's host does not wait (a NCCL request's wait() orders the
// device stream only), so no patch forward's host task is held back by a transfer.
TEST(SimulateTest, APipelineHostIsNeverHeldBackByATransfer) {
  Fixture f("pixart-alpha", "l40-48gb", 4, "pipefusion=4,patches=4,warmup=1", 1024, 1024, 6);
  f.compute = FlatCompute(*f.cluster.gpu);
  f.compute.set_launch_overhead(Seconds(10e-6));
  FreeComm(&f.comm);
  for (LinkTier t : {LinkTier::kIntra, LinkTier::kCrossSocket, LinkTier::kInterNode}) {
    f.comm.SetFit(Collective::kSendRecv, t, PiecewiseLatencyModel({{1, 1e30, 0.05, 1e30}}));  // 50 ms a patch
  }
  SimOptions full;
  full.extrapolate = false;
  TaskScheduler e;
  auto r = Simulate(f.Input(), full, &e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int patched_host_tasks = 0;
  for (int i = 0; i < e.num_tasks(); ++i) {
    const TaskSpec& t = e.task(i);
    if (t.kind != TaskKind::kHost || t.step < 1) continue;  // the patched steps after the warm-up
    ++patched_host_tasks;
    const int held = e.last_dep(i);
    ASSERT_FALSE(held >= 0 && e.task(held).kind == TaskKind::kComm)
        << "host task " << t.name << " of step " << t.step << " waited for " << e.task(held).name;
  }
  EXPECT_GT(patched_host_tasks, 0);
  // The transfers bound the loop: each step's patches cross three stage boundaries and return.
  EXPECT_GT(r->dit.value(), 5 * 4 * 0.05);
}

// Fewer patches than stages: each step waits for every patch's round trip through the stages,
// while a host that is never held back runs further ahead each step, so the schedule never
// becomes periodic. The steady step reported is then what each further step adds, not the
// interval between the first tasks of two steps (the host's).
TEST(SimulateTest, TheStepOfAScheduleThatNeverSettlesIsWhatEachStepAdds) {
  auto dit = [](int steps) {
    Fixture f("pixart-alpha", "l40-48gb", 8, "pipefusion=8,patches=4,warmup=0", 1024, 1024, steps);
    f.compute.set_launch_overhead(Seconds(5e-6));
    auto r = Simulate(f.Input());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  };
  const SimResult a = dit(16), b = dit(20);
  const double added = (b.dit - a.dit).value() / 4;
  EXPECT_NEAR(b.step.value() / added, 1.0, 0.02);
}

TEST(SimulateTest, ExtrapolationIsExact) {
  for (const char* config : {"ulysses=2,ring=2,cfg=2", "pipefusion=4,patches=8,warmup=2,cfg=2", "distrifusion=8",
                             "tp=2,pipefusion=2,cfg=2", "ring=8"}) {
    Fixture f("sd3-medium", "l40-48gb", 8, config, 1024, 1024, 28, OutputType::kDecoded);
    SimOptions full;
    full.extrapolate = false;
    auto a = Simulate(f.Input());
    auto b = Simulate(f.Input(), full);
    ASSERT_TRUE(a.ok() && b.ok()) << config;
    EXPECT_NEAR(a->total.value() / b->total.value(), 1.0, 1e-9) << config;
    EXPECT_NEAR(a->step.value() / b->step.value(), 1.0, 1e-6) << config;
  }
}

TEST(SimulateTest, EveryForwardScheduledOnce) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 8, "pipefusion=4,patches=8,ulysses=2", 1024, 1024, 6);
  SimOptions opt;
  opt.extrapolate = false;
  TaskScheduler e;
  auto r = Simulate(f.Input(), opt, &e);
  ASSERT_TRUE(r.ok());
  // Warm-up (1 step): one whole forward per stage; then 5 steps x 8 patches per stage.
  // Stage forwards end in their last compute task before a send or latent return.
  std::map<std::pair<int, int>, double> busy;  // (rank, step) -> compute seconds
  int sends = 0, returns = 0;
  for (int i = 0; i < e.num_tasks(); ++i) {
    const TaskSpec& t = e.task(i);
    EXPECT_GE(e.end(i).value(), e.start(i).value());
    if (t.name == "send_patch") ++sends;
    if (t.name == "return_latent") ++returns;
    if (t.kind == TaskKind::kCompute && t.step >= 0) busy[{e.stream_rank(t.stream), t.step}] += t.duration.value();
  }
  EXPECT_EQ(sends, 3 * (1 + 5 * 8));
  EXPECT_EQ(returns, 1 + 5 * 8);
  // Every pipelined step carries the same compute on each stage's rank.
  for (const auto& [key, seconds] : busy) {
    const double first = busy[std::make_pair(key.first, 1)];
    if (key.second >= 2) {
      EXPECT_NEAR(seconds, first, 1e-9 * seconds);
    }
  }
}

// With extrapolation the scheduler handed back holds the one run that was used (what a trace
// draws), not every shorter run tried before the schedule became periodic.
TEST(SimulateTest, ScheduleHandedBackHoldsOneRun) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 8, "pipefusion=4,patches=8,ulysses=2", 1024, 1024, 50);
  TaskScheduler e;
  auto r = Simulate(f.Input(), SimOptions{}, &e);
  ASSERT_TRUE(r.ok());
  // Host, compute and comm streams for each of the 4 stages, once.
  EXPECT_EQ(e.num_streams(), 3 * 4);
  int max_step = -1;
  for (int i = 0; i < e.num_tasks(); ++i) max_step = std::max(max_step, e.task(i).step);
  EXPECT_EQ(max_step + 1, r->simulated_steps);
  EXPECT_EQ(e.num_tasks(), r->tasks);
}

TEST(SimulateTest, Monotone) {
  for (const char* config : {"", "ulysses=8", "ring=8", "pipefusion=4,cfg=2", "ulysses=2,ring=2,cfg=2", "tp=8"}) {
    const int gpus = std::string(config).empty() ? 1 : 8;
    Fixture base("pixart-alpha", "l40-48gb", gpus, config, 2048, 2048, 20);
    const double t0 = Simulate(base.Input())->total.value();
    Fixture fast_link("pixart-alpha", "l40-48gb", gpus, config, 2048, 2048, 20);
    fast_link.comm.ScaleBandwidth(4.0);
    EXPECT_LE(Simulate(fast_link.Input())->total.value(), t0 * (1 + 1e-12)) << config;
    Fixture fast_gpu("pixart-alpha", "l40-48gb", gpus, config, 2048, 2048, 20);
    fast_gpu.compute.ScalePeak(2.0);
    EXPECT_LE(Simulate(fast_gpu.Input())->total.value(), t0 * (1 + 1e-12)) << config;
    double prev = 0;
    for (int steps : {4, 8, 20, 50}) {
      Fixture more("pixart-alpha", "l40-48gb", gpus, config, 2048, 2048, steps);
      const double t = Simulate(more.Input())->total.value();
      EXPECT_GT(t, prev) << config << " steps " << steps;
      prev = t;
    }
  }
}

TEST(SimulateTest, Deterministic) {
  Fixture f("hunyuandit-v1.2", "l40-48gb", 8, "pipefusion=4,patches=4,cfg=2", 2048, 2048, 30);
  auto a = Simulate(f.Input());
  auto b = Simulate(f.Input());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->total.value(), b->total.value());
  EXPECT_EQ(a->steady.bubble.value(), b->steady.bubble.value());
  EXPECT_EQ(a->imbalance, b->imbalance);
}

TEST(SimulateTest, BreakdownsAndMemory) {
  Fixture pcie("cogvideox-5b", "l40-48gb", 8, "ring=8", 480, 720, 50, OutputType::kLatent, 49);
  auto r = Simulate(pcie.Input());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ranks.size(), 8u);
  EXPECT_TRUE(r->fits);
  EXPECT_GT(r->steady.compute.value(), 0);
  Fixture pf("pixart-alpha", "a100-sxm4-80gb", 8, "pipefusion=8,patches=8", 1024, 1024, 4);
  auto p = Simulate(pf.Input());
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p->warmup.value(), 0);
  EXPECT_GT(p->steady.bubble.value(), 0);  // 4 steps: the fill and drain show
  Fixture big("wan2.1-14b", "rtx4090-24gb", 1, "", 720, 1280, 50, OutputType::kDecoded, 81);
  auto oom = Simulate(big.Input());
  ASSERT_TRUE(oom.ok());
  EXPECT_FALSE(oom->fits);
}

TEST(SimulateTest, ChromeTraceHasATrackPerRankAndStream) {
  Fixture f("sd3-medium", "h100-sxm5-80gb", 4, "pipefusion=2,ulysses=2", 1024, 1024, 4, OutputType::kDecoded);
  SimOptions opt;
  opt.extrapolate = false;
  TaskScheduler e;
  ASSERT_TRUE(Simulate(f.Input(), opt, &e).ok());
  const std::string path = std::string(DITUNE_TEST_TMP_DIR) + "/trace.json";
  std::filesystem::create_directories(DITUNE_TEST_TMP_DIR);
  ASSERT_TRUE(WriteChromeTrace(e, f.Input(), path).ok());
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::set<int> pids;
  std::set<std::pair<int, std::string>> threads;
  std::set<std::string> names;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") {
      threads.insert({ev["pid"].get<int>(), ev["args"]["name"].get<std::string>()});
    }
    if (ev["ph"] == "X") {
      pids.insert(ev["pid"].get<int>());
      names.insert(ev["name"].get<std::string>());
      EXPECT_GE(ev["dur"].get<double>(), 0);
    }
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2, 3}));
  for (int r = 0; r < 4; ++r) {
    for (const char* s : {"host", "compute", "comm"}) EXPECT_TRUE(threads.count({r, s})) << r << s;
  }
  bool sync_comm = false;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "X" && ev.contains("args") && ev["args"].contains("sync_comm_us")) sync_comm = true;
  }
  EXPECT_TRUE(sync_comm);  // Ulysses' all-to-alls inside the forwards
  for (const char* n : {"text_encode", "fwd", "fwd_patch", "issue", "send_patch", "return_latent", "vae_decode"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_FALSE(WriteChromeTrace(e, f.Input(), "/nonexistent-dir/trace.json").ok());
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

// The per-kernel price of one rank's loop: on one device, every op of every forward once per
// step, summed by kernel; the methods' own kernels appear where they run (Ring's merges,
// Ulysses' copies); a later PipeFusion stage has its blocks and none of the embeddings.
TEST(ModelledKernelTimesTest, SumsEveryForwardsOpsByKernel) {
  Fixture f("flux.1-dev", "h100-sxm5-80gb", 1, "", 1024, 1024, 4);
  f.compute.SetRuntime(Runtime::kEngine);
  auto times = ModelledKernelTimes(f.Input(), 0);
  ASSERT_TRUE(times.ok()) << times.status().ToString();
  auto tokens = ComputeTokenGeometry(*f.model, f.workload);
  const RankWork w = ComputeRankWork(*f.model, *tokens, f.workload, f.config);
  std::map<std::string, double> want;
  for (int b = 0; b < f.model->num_blocks(); ++b) {
    for (const auto& op : BlockOps(*f.model, f.model->family_of(b), w)) {
      if (!op.host_only) want[op.kernel] += 4 * f.compute.DeviceTime(op).value();
    }
  }
  for (const auto& op : StepOverheadOps(*f.model, w)) want[op.kernel] += 4 * f.compute.DeviceTime(op).value();
  ASSERT_EQ(times->size(), want.size());
  for (const auto& [kernel, t] : want) {
    ASSERT_TRUE(times->count(kernel)) << kernel;
    EXPECT_NEAR(times->at(kernel).value(), t, 1e-12 + 1e-9 * t) << kernel;
  }
  // The double blocks' MLP runs its GELU in the up-projection's epilogue; the single
  // blocks' GELU over the fused projection's MLP columns is a kernel of its own.
  EXPECT_GT(times->at(kernel_names::kGemmGelu).value(), 0);
  EXPECT_GT(times->at(kernel_names::kGelu).value(), 0);
  EXPECT_FALSE(times->count(kernel_names::kAttentionMerge));

  Fixture ring("flux.1-dev", "h100-sxm5-80gb", 4, "ring=2,ulysses=2", 1024, 1024, 4);
  auto rt = ModelledKernelTimes(ring.Input(), 3);
  ASSERT_TRUE(rt.ok());
  EXPECT_GT(rt->at(kernel_names::kAttentionMerge).value(), 0);
  EXPECT_GT(rt->at(kernel_names::kCopy).value(), 0);

  Fixture pp("pixart-alpha", "h100-sxm5-80gb", 2, "pipefusion=2,patches=4,warmup=1", 1024, 1024, 5);
  auto first = ModelledKernelTimes(pp.Input(), 0);
  auto second = ModelledKernelTimes(pp.Input(), 1);
  ASSERT_TRUE(first.ok() && second.ok());
  // Equal halves of PixArt's 28 blocks; only the first stage embeds and projects out.
  EXPECT_GT(first->at(kernel_names::kGemm).value(), second->at(kernel_names::kGemm).value());
  EXPECT_NEAR(first->at(kernel_names::kAttention).value(), second->at(kernel_names::kAttention).value(),
              1e-9 * second->at(kernel_names::kAttention).value());
  EXPECT_GT(second->at(kernel_names::kCopy).value(), 0);  // the stale K/V buffers

  auto bad = ModelledKernelTimes(pp.Input(), 2);
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ranks 0 to 1"), std::string::npos);
}

}  // namespace
}  // namespace ditune
