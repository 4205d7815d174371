#include "core/parallel_config.h"

#include <gtest/gtest.h>

namespace ditune {
namespace {

TEST(ParallelConfigTest, DefaultsAndEmpty) {
  auto c = ParseParallelConfig("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_EQ(ToString(*c), "");
  EXPECT_EQ(Label(*c), "1 device");
  auto p = *ParseParallelConfig("pipefusion=4");
  EXPECT_EQ(p.patches, 4);  // patches default to the stage count
  EXPECT_EQ(p.warmup, 1);
}

TEST(ParallelConfigTest, RoundTrips) {
  for (const char* text :
       {"", "ulysses=2", "ring=4", "ulysses=2,ring=2,pipefusion=2,patches=4,cfg=2",
        "pipefusion=4,warmup=2", "pipefusion=2,patches=8,warmup=0,dp=2,tp=2",
        "distrifusion=4", "ulysses=2,cfg=2,order=tp-sp-cfg-pp-dp", "warmup=3"}) {
    auto c = ParseParallelConfig(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();
    EXPECT_EQ(ToString(*c), text);
    EXPECT_EQ(*ParseParallelConfig(ToString(*c)), *c);
  }
  // Non-canonical input prints canonically.
  EXPECT_EQ(ToString(*ParseParallelConfig(" cfg=2, ulysses=4 ,patches=2,pipefusion=2,tp=1")),
            "ulysses=4,pipefusion=2,cfg=2");
}

TEST(ParallelConfigTest, XditFlags) {
  auto c = ParseParallelConfig(
      "--ulysses_degree 2 --ring_degree 2 --pipefusion_parallel_degree 2 --num_pipeline_patch 4 "
      "--warmup_steps 1 --use_cfg_parallel --data_parallel_degree 1 --tensor_parallel_degree 1");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ToString(*c), "ulysses=2,ring=2,pipefusion=2,patches=4,cfg=2");
  EXPECT_EQ(c->world_size(), 16);
  EXPECT_EQ(*ParseParallelConfig("--ulysses_degree=4"), *ParseParallelConfig("ulysses=4"));
  // Emitted flags parse back into the same config.
  for (const char* text : {"", "ulysses=8", "ring=2,cfg=2", "pipefusion=4,patches=8,warmup=2,cfg=2",
                           "dp=2,tp=2", "warmup=0"}) {
    ParallelConfig orig = *ParseParallelConfig(text);
    auto back = ParseParallelConfig(ToXditFlags(orig));
    ASSERT_TRUE(back.ok()) << ToXditFlags(orig);
    EXPECT_EQ(*back, orig) << ToXditFlags(orig);
  }
  EXPECT_FALSE(SupportedByXdit(*ParseParallelConfig("distrifusion=2")).ok());
  EXPECT_FALSE(SupportedByXdit(*ParseParallelConfig("order=sp-tp-pp-cfg-dp")).ok());
}

TEST(ParallelConfigTest, SyntaxErrorsNameTheProblem) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"ulysess=2", "unknown config key 'ulysess'; valid keys: ulysses"},
      {"ulysses=0", "ulysses: '0' is not an integer >= 1"},
      {"ring=two", "ring: 'two' is not an integer >= 1"},
      {"ulysses", "is not key=value"},
      {"warmup=-1", "warmup: '-1' is not an integer >= 0"},
      {"order=tp-sp-pp", "must name tp, sp, pp, cfg and dp once each"},
      {"order=tp-tp-pp-cfg-dp", "must name tp, sp, pp, cfg and dp once each"},
      {"--ulysses_degree", "needs a value"},
      {"--sp_degree 2", "unknown flag '--sp_degree'; valid flags: xDiT's"},
      {"--use_cfg_parallel=1", "takes no value"},
  };
  for (const auto& c : cases) {
    auto r = ParseParallelConfig(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

// The memory placements: te= and vae= read back as written; vae_tiling=1 is vae=tiled; bad
// values name the valid ones.
TEST(ParallelConfigTest, MemoryPlacementsParseAndPrint) {
  for (const char* text : {"ulysses=2,te=parallel", "ulysses=2,te=fsdp", "te=cpu", "vae=tiled", "ulysses=2,vae=parallel",
                           "ulysses=2,te=fsdp,vae=tiled", "ulysses=2,vae=cpu"}) {
    auto c = ParseParallelConfig(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();
    EXPECT_EQ(ToString(*c), text);
  }
  EXPECT_EQ(ParseParallelConfig("vae_tiling=1")->vae, VaePlacement::kTiled);
  EXPECT_EQ(ParseParallelConfig("vae_tiling=0")->vae, VaePlacement::kWhole);
  EXPECT_EQ(ParseParallelConfig("te=whole")->te, TextEncoderPlacement::kWhole);
  auto bad = ParseParallelConfig("te=gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("whole, parallel, fsdp, cpu"), std::string::npos) << bad.status().ToString();
  auto bad_vae = ParseParallelConfig("vae=sliced");
  ASSERT_FALSE(bad_vae.ok());
  EXPECT_NE(bad_vae.status().message().find("whole, tiled, parallel"), std::string::npos) << bad_vae.status().ToString();
  auto both = ParseParallelConfig("vae=tiled,vae_tiling=1");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("not both"), std::string::npos) << both.status().ToString();
  EXPECT_FALSE(ParseParallelConfig("vae_tiling=2").ok());
  // A ControlNet split like the DiT, in ditune's syntax and cache-dit's flag.
  EXPECT_EQ(ParseParallelConfig("ulysses=4,controlnet=parallel")->controlnet, ControlNetPlacement::kParallel);
  EXPECT_EQ(ToString(*ParseParallelConfig("ulysses=4,controlnet=parallel")), "ulysses=4,controlnet=parallel");
  EXPECT_EQ(ToString(*ParseParallelConfig("ulysses=4,controlnet=whole")), "ulysses=4");
  EXPECT_EQ(ToString(*ParseParallelConfig("--ulysses_degree 4 --parallel-controlnet")), "ulysses=4,controlnet=parallel");
  auto bad_cn = ParseParallelConfig("controlnet=split");
  ASSERT_FALSE(bad_cn.ok());
  EXPECT_NE(bad_cn.status().message().find("whole, parallel"), std::string::npos) << bad_cn.status().ToString();
}

// The runtimes' own spellings of a configuration, pasted from their launch lines.
TEST(ParallelConfigTest, EachRuntimesFlagsAreAConfig) {
  auto wan = ParseParallelConfig("--ulysses_size 8 --ring_size 1 --dit_fsdp --t5_fsdp");
  ASSERT_TRUE(wan.ok()) << wan.status().ToString();
  EXPECT_EQ(ToString(*wan), "ulysses=8,fsdp=8,te=fsdp");
  EXPECT_EQ(ToString(*ParseParallelConfig("--offload_model True --t5_cpu")), "offload=1,te=cpu");
  EXPECT_EQ(ToString(*ParseParallelConfig("--ulysses_degree 2 --use_parallel_vae")), "ulysses=2,vae=parallel");
  EXPECT_EQ(ToString(*ParseParallelConfig("--ulysses-degree 2 --vae-tiling")), "ulysses=2,vae=tiled");
  auto wan_one = ParseParallelConfig("--offload_model True");
  ASSERT_TRUE(wan_one.ok());
  EXPECT_EQ(wan_one->offload, 1);
  EXPECT_EQ(ParseParallelConfig("--offload_model False")->offload, 0);
  EXPECT_FALSE(ParseParallelConfig("--offload_model maybe").ok());
  auto sg = ParseParallelConfig("--ulysses-degree 2 --enable-cfg-parallel --tp-size 2");
  ASSERT_TRUE(sg.ok()) << sg.status().ToString();
  EXPECT_EQ(ToString(*sg), "ulysses=2,cfg=2,tp=2");
  auto vo = ParseParallelConfig("--usp 2 --cfg-parallel-size 2");
  ASSERT_TRUE(vo.ok()) << vo.status().ToString();
  EXPECT_EQ(ToString(*vo), "ulysses=2,cfg=2");
  EXPECT_FALSE(ParseParallelConfig("--cfg-parallel-size 3").ok());
  auto compiled = ParseParallelConfig("--ulysses_degree 4 --use_torch_compile");
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(ToString(*compiled), "ulysses=4,compile=1");
  EXPECT_EQ(*ParseParallelConfig(ToString(*compiled)), *compiled);
  EXPECT_EQ(*ParseParallelConfig(ToXditFlags(*compiled)), *compiled);
  auto eager = ParseParallelConfig("--usp 2 --enforce-eager");
  ASSERT_TRUE(eager.ok()) << eager.status().ToString();
  EXPECT_EQ(ToString(*eager), "ulysses=2,eager=1");
  EXPECT_EQ(*ParseParallelConfig(ToString(*eager)), *eager);
  EXPECT_FALSE(ParseParallelConfig("eager=2").ok());
  // What is not a parallel setting says so.
  auto gpus = ParseParallelConfig("--ulysses_size 2 --num-gpus 2");
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.status().message().find("--gpus"), std::string::npos) << gpus.status().message();
}

}  // namespace
}  // namespace ditune
