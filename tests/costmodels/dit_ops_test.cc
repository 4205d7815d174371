#include "costmodels/dit_ops.h"

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "core/config_rules.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}
const ModelSpec& Model(const char* id) { return **Cat().Model(id); }

double ClassFlops(const std::vector<OpCost>& ops, OpClass cls) {
  double f = 0;
  for (const auto& o : ops) f += o.cls == cls ? o.flops.value() : 0;
  return f;
}

RankWork Work(const char* model, int h, int w, const char* config, int frames = 1) {
  const ModelSpec& m = Model(model);
  Workload wl{model, h, w, frames, 20, 1, OutputType::kDecoded};
  return ComputeRankWork(m, *ComputeTokenGeometry(m, wl), wl, *ParseParallelConfig(config));
}

TEST(DitOpsTest, PixArtBlockFlopsByHand) {
  const ModelSpec& m = Model("pixart-alpha");
  RankWork w = Work("pixart-alpha", 1024, 1024, "");
  EXPECT_EQ(w.batch, 2);  // CFG: conditional and unconditional
  const double S = 4096, T = 120, H = 1152, b = 2;
  auto ops = BlockOps(m, BlockFamily::kCross, w);
  // qkv 6SH^2, attn out 2SH^2, cross q 2SH^2, cross out 2SH^2, MLP 16SH^2, cross kv 4TH^2.
  EXPECT_DOUBLE_EQ(ClassFlops(ops, OpClass::kGemm), b * (28 * S * H * H + 4 * T * H * H));
  // Self-attention 4 S^2 H, cross-attention 4 S T H.
  EXPECT_DOUBLE_EQ(ClassFlops(ops, OpClass::kAttention), b * (4 * S * S * H + 4 * S * T * H));
}

TEST(DitOpsTest, FluxBlocksFlopsByHand) {
  const ModelSpec& m = Model("flux.1-dev");
  RankWork w = Work("flux.1-dev", 1024, 1024, "");
  EXPECT_EQ(w.batch, 1);  // no CFG
  const double S = 4096, T = 512, H = 3072;
  auto joint = BlockOps(m, BlockFamily::kJoint, w);
  // Per stream: modulation 12H^2, QKV 6nH^2, out 2nH^2, MLP 16nH^2.
  EXPECT_DOUBLE_EQ(ClassFlops(joint, OpClass::kGemm), 24 * (S + T) * H * H + 24 * H * H);
  EXPECT_DOUBLE_EQ(ClassFlops(joint, OpClass::kAttention), 4 * (S + T) * (S + T) * H);
  auto single = BlockOps(m, BlockFamily::kSingle, w);
  // Modulation 6H^2, fused QKV+MLP-in 14nH^2, fused out 10nH^2.
  EXPECT_DOUBLE_EQ(ClassFlops(single, OpClass::kGemm), 24 * (S + T) * H * H + 6 * H * H);
  EXPECT_DOUBLE_EQ(ClassFlops(single, OpClass::kAttention), 4 * (S + T) * (S + T) * H);
}

TEST(DitOpsTest, ParallelSharesDivideTheWork) {
  const ModelSpec& m = Model("flux.1-dev");
  const double serial = TotalFlops(BlockOps(m, BlockFamily::kSingle, Work("flux.1-dev", 1024, 1024, ""))).value();
  for (const char* c : {"ulysses=4", "ring=4", "ulysses=2,ring=2", "tp=4"}) {
    RankWork w = Work("flux.1-dev", 1024, 1024, c);
    auto ops = BlockOps(m, BlockFamily::kSingle, w);
    // Attention divides exactly; GEMMs too (text splits evenly: 512 % 4 == 0), modulation
    // (tiny) is replicated.
    EXPECT_NEAR(ClassFlops(ops, OpClass::kAttention) * 4,
                ClassFlops(BlockOps(m, BlockFamily::kSingle, Work("flux.1-dev", 1024, 1024, "")), OpClass::kAttention),
                1.0) << c;
    EXPECT_NEAR(TotalFlops(ops).value() * 4 / serial, 1.0, 0.01) << c;
  }
  // Text that does not split evenly stays whole on every rank (512 % 3 != 0).
  RankWork w3 = Work("flux.1-dev", 768, 1024, "ulysses=3");
  EXPECT_EQ(w3.txt_tokens, 512);
  // PipeFusion: one patch of the rank's tokens, attention over the whole (stale) sequence.
  RankWork pf = Work("pixart-alpha", 1024, 1024, "pipefusion=2,patches=4");
  EXPECT_EQ(pf.img_tokens, 1024);
  EXPECT_EQ(pf.seq_img_tokens, 4096);
  // CFG parallel halves the batch.
  EXPECT_EQ(Work("pixart-alpha", 1024, 1024, "cfg=2").batch, 1);
}

TEST(DitOpsTest, LinearAttentionIsLinearInTokens) {
  const ModelSpec& m = Model("sana-1600m");
  auto a = ClassFlops(BlockOps(m, BlockFamily::kCross, Work("sana-1600m", 2048, 2048, "")), OpClass::kLinearAttention);
  auto b = ClassFlops(BlockOps(m, BlockFamily::kCross, Work("sana-1600m", 4096, 4096, "")), OpClass::kLinearAttention);
  EXPECT_NEAR(b / a, 4.0, 1e-9);
}

TEST(DitOpsTest, ParameterCountsFromShapesMatchPublished) {
  EXPECT_NEAR(DitParams(Model("flux.1-dev")) / 11.9e9, 1.0, 0.03);
  EXPECT_NEAR(DitParams(Model("pixart-alpha")) / 0.611e9, 1.0, 0.05);
  EXPECT_NEAR(DitParams(Model("sd3-medium")) / 2.03e9, 1.0, 0.05);
  EXPECT_NEAR(DitParams(Model("wan2.1-14b")) / 14e9, 1.0, 0.05);
  for (const auto& m : Cat().models()) {
    if (m.published_params <= 0) continue;
    // A looser cross-check for every model (shared-weight designs like CogVideoX differ).
    EXPECT_NEAR(DitParams(m) / m.published_params, 1.0, 0.35) << m.id;
  }
}

// FLUX.2's blocks take their modulation from three shared layers (shared_modulation): its
// parameter count from the shapes is then the published 32B (40.6B with a modulation layer
// in every block), the blocks issue no modulation GEMM and the step issues three.
TEST(DitOpsTest, SharedModulationIsCountedOnceAForward) {
  const ModelSpec& m = Model("flux.2-dev");
  ASSERT_TRUE(m.shared_modulation);
  EXPECT_NEAR(DitParams(m) / 32e9, 1.0, 0.01);
  ModelSpec per_block = m;
  per_block.shared_modulation = false;
  const double H = m.hidden;
  EXPECT_NEAR(BlockParams(per_block, BlockFamily::kJoint) - BlockParams(m, BlockFamily::kJoint), 12 * H * H, 1);
  EXPECT_NEAR(BlockParams(per_block, BlockFamily::kSingle) - BlockParams(m, BlockFamily::kSingle), 3 * H * H, 1);
  const RankWork w = Work("flux.2-dev", 1024, 1024, "");
  auto count = [](const std::vector<OpCost>& ops) {
    int n = 0;
    for (const auto& o : ops) n += o.name.find("modulation") != std::string::npos;
    return n;
  };
  EXPECT_EQ(count(BlockOps(m, BlockFamily::kJoint, w)), 0);
  EXPECT_EQ(count(BlockOps(m, BlockFamily::kSingle, w)), 0);
  EXPECT_EQ(count(StepOverheadOps(m, w)), 3);
  EXPECT_EQ(count(BlockOps(per_block, BlockFamily::kJoint, w)), 2);
  EXPECT_EQ(count(StepOverheadOps(per_block, w)), 0);
}

}  // namespace
}  // namespace ditune
