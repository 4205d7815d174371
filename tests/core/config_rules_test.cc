#include "core/config_rules.h"

#include <gtest/gtest.h>

#include "tests/core/test_catalog.h"

namespace ditune {
namespace {

using testing::TestModel;

ValidationContext Ctx(const std::string& model, int h, int w, int gpus, int frames = 1,
                      int steps = 20, int batch = 1) {
  const ModelSpec& m = TestModel(model);
  Workload wl{model, h, w, frames, steps, batch, OutputType::kDecoded};
  return {&m, *ComputeTokenGeometry(m, wl), steps, batch, gpus};
}

// Returns the violations of `config`, checking that `rule` is among them (or that there
// are none when rule is nullptr).
std::vector<Violation> Expect(const ValidationContext& ctx, const char* config, const char* rule) {
  auto c = ParseParallelConfig(config);
  EXPECT_TRUE(c.ok()) << config;
  auto v = CheckConfig(ctx, *c);
  if (rule == nullptr) {
    EXPECT_TRUE(v.empty()) << config << ": " << (v.empty() ? "" : v[0].message);
    EXPECT_TRUE(IsValidConfig(ctx, *c)) << config;
  } else {
    bool found = false;
    for (const auto& x : v) found |= x.rule == rule;
    EXPECT_TRUE(found) << config << " should break " << rule;
    EXPECT_FALSE(IsValidConfig(ctx, *c)) << config;
  }
  return v;
}

std::string MessageOf(const std::vector<Violation>& v, const char* rule) {
  for (const auto& x : v) {
    if (x.rule == rule) return x.message;
  }
  return "";
}

TEST(ValidateTest, ProductEqualsGpus) {
  auto ctx = Ctx("pixart-alpha", 1024, 1024, 8);
  Expect(ctx, "ulysses=2,pipefusion=2,cfg=2", nullptr);
  auto v = Expect(ctx, "ulysses=2,cfg=2", kRuleProduct);
  std::string m = MessageOf(v, kRuleProduct);
  EXPECT_NE(m.find("= 4 devices, but the cluster has 8 GPUs"), std::string::npos) << m;
  EXPECT_NE(m.find("cfg=2 doubles"), std::string::npos) << m;
  EXPECT_NE(m.find("nearest valid: ulysses=4,cfg=2"), std::string::npos) << m;
  EXPECT_NE(m.find("ulysses=2,ring=2,cfg=2"), std::string::npos) << m;
}

TEST(ValidateTest, HeadsDivisibleByUlysses) {
  auto ctx = Ctx("flux.1-dev", 1024, 1024, 8);
  Expect(ctx, "ulysses=8", nullptr);
  // ulysses=3 on 8 GPUs also breaks the product; 6 heads-wise fine for 24 heads.
  auto v = Expect(Ctx("pixart-alpha", 1024, 1024, 6), "ulysses=6", kRuleUlyssesHeads);
  std::string m = MessageOf(v, kRuleUlyssesHeads);
  EXPECT_NE(m.find("ulysses 6 x tp 1 = 6 does not divide the 16 attention heads of pixart-alpha"),
            std::string::npos) << m;
  EXPECT_NE(m.find("Ulysses degrees pixart-alpha allows on 6 GPUs: 1, 2"), std::string::npos) << m;
  Expect(Ctx("flux.1-dev", 768, 1024, 6), "ulysses=6", nullptr);  // 24 heads, 48 rows
  EXPECT_EQ(AllowedUlyssesDegrees(TestModel("flux.1-dev"), 8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(AllowedUlyssesDegrees(TestModel("cogvideox-5b"), 48),
            (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16, 24, 48}));
  // Ulysses and tp share the heads.
  Expect(Ctx("pixart-alpha", 1024, 1024, 32), "ulysses=16,tp=2", kRuleUlyssesHeads);
}

TEST(ValidateTest, TensorParallelDividesWidths) {
  Expect(Ctx("pixart-alpha", 1024, 1024, 8), "tp=8", nullptr);
  // Wan 1.3B: 12 heads and hidden 1536 split 3 ways, its FFN of 8960 does not.
  auto v = Expect(Ctx("wan2.1-1.3b", 480, 832, 3, 81, 50), "tp=3", kRuleTpWidth);
  std::string m = MessageOf(v, kRuleTpWidth);
  EXPECT_NE(m.find("MLP width 8960 of wan2.1-1.3b; valid tp degrees up to 3: 1, 2"), std::string::npos) << m;
}

TEST(ValidateTest, SequenceDivisibleBySp) {
  // 1024x1024 PixArt: 64 patch rows; 1008 px -> 63 rows.
  Expect(Ctx("pixart-alpha", 1024, 1024, 8), "ulysses=8", nullptr);
  auto v = Expect(Ctx("pixart-alpha", 1008, 1024, 4), "ulysses=4", kRuleSpRows);
  std::string m = MessageOf(v, kRuleSpRows);
  EXPECT_NE(m.find("does not divide the 63 patch rows"), std::string::npos) << m;
  EXPECT_NE(m.find("split it evenly (up to 4): 1, 3"), std::string::npos) << m;
  // Video: HunyuanVideo 720p has 45 rows but 80 columns, so sp=8 splits it.
  Expect(Ctx("hunyuanvideo", 720, 1280, 8, 129, 50), "ulysses=8", nullptr);
  Expect(Ctx("cogvideox-5b", 480, 720, 6, 49, 50), "ulysses=3,ring=2", nullptr);
  Expect(Ctx("cogvideox-5b", 480, 720, 7, 49, 50), "ring=7", kRuleSpRows);
}

TEST(ValidateTest, PipeFusionPatchesAreWholeRows) {
  auto ctx = Ctx("pixart-alpha", 1024, 1024, 4);  // 64 rows
  Expect(ctx, "pipefusion=2,patches=8,ulysses=2", nullptr);
  auto v = Expect(ctx, "pipefusion=4,patches=3", kRulePatches);
  std::string m = MessageOf(v, kRulePatches);
  EXPECT_NE(m.find("patches 3 x sp 1 = 3 does not divide the 64 patch rows"), std::string::npos) << m;
  EXPECT_NE(m.find("valid patch counts: 1, 2, 4, 8, 16, 32, 64"), std::string::npos) << m;
  v = Expect(ctx, "pipefusion=2,patches=64,ulysses=2", kRulePatches);
  EXPECT_NE(MessageOf(v, kRulePatches).find("valid patch counts: 1, 2, 4, 8, 16, 32"), std::string::npos);
}

TEST(ValidateTest, StagesAtMostBlocks) {
  Expect(Ctx("tiny-pixart", 64, 64, 2), "pipefusion=2", nullptr);
  auto v = Expect(Ctx("tiny-pixart", 64, 64, 4), "pipefusion=4,patches=1", kRuleStages);
  EXPECT_NE(MessageOf(v, kRuleStages).find("exceeds the 2 blocks of tiny-pixart"), std::string::npos);
}

TEST(ValidateTest, WarmupAtMostSteps) {
  Expect(Ctx("pixart-alpha", 1024, 1024, 2, 1, 20), "pipefusion=2,warmup=20", nullptr);
  auto v = Expect(Ctx("pixart-alpha", 1024, 1024, 2, 1, 20), "pipefusion=2,warmup=21", kRuleWarmup);
  EXPECT_NE(MessageOf(v, kRuleWarmup).find("valid: 0 to 20"), std::string::npos);
}

TEST(ValidateTest, CfgOnlyWithGuidance) {
  Expect(Ctx("pixart-alpha", 1024, 1024, 2), "cfg=2", nullptr);
  auto v = Expect(Ctx("flux.1-dev", 1024, 1024, 4), "ulysses=2,cfg=2", kRuleCfg);
  std::string m = MessageOf(v, kRuleCfg);
  EXPECT_NE(m.find("flux.1-dev runs no classifier-free guidance"), std::string::npos) << m;
  EXPECT_NE(m.find("nearest valid: ulysses=4 | ulysses=2,ring=2"), std::string::npos) << m;
  v = Expect(Ctx("pixart-alpha", 1024, 1024, 3), "cfg=3", kRuleCfg);
  EXPECT_NE(MessageOf(v, kRuleCfg).find("cfg is 1 or 2"), std::string::npos);
}

TEST(ValidateTest, BatchDivisibleByDp) {
  Expect(Ctx("pixart-alpha", 1024, 1024, 2, 1, 20, 4), "dp=2", nullptr);
  auto v = Expect(Ctx("pixart-alpha", 1024, 1024, 2, 1, 20, 3), "dp=2", kRuleDp);
  EXPECT_NE(MessageOf(v, kRuleDp).find("--batch 2"), std::string::npos);
}

TEST(ValidateTest, DistriFusionStandsAlone) {
  Expect(Ctx("sd3-medium", 1024, 1024, 4), "distrifusion=4", nullptr);
  auto v = Expect(Ctx("sd3-medium", 1024, 1024, 4), "distrifusion=2,cfg=2", kRuleDistriFusion);
  EXPECT_NE(MessageOf(v, kRuleDistriFusion).find("stands alone"), std::string::npos);
}

TEST(ValidateTest, DegreesPositiveForBuiltConfigs) {
  ParallelConfig c;
  c.ulysses = 0;
  auto v = CheckConfig(Ctx("pixart-alpha", 1024, 1024, 1), c);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, kRuleDegrees);
}

TEST(ValidateTest, ValidateConfigListsEveryViolation) {
  auto ctx = Ctx("flux.1-dev", 1024, 1024, 8);
  Status s = ValidateConfig(ctx, *ParseParallelConfig("ulysses=5,cfg=2"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("[product-equals-gpus]"), std::string::npos);
  EXPECT_NE(s.message().find("[heads-divisible-by-ulysses-x-tp]"), std::string::npos);
  EXPECT_NE(s.message().find("[cfg-needs-guidance]"), std::string::npos);
  EXPECT_NE(s.message().find("Ulysses degrees flux.1-dev allows on 8 GPUs: 1, 2, 4, 8"), std::string::npos);
}

}  // namespace
}  // namespace ditune
