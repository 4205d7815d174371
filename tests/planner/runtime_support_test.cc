// What xDiT runs per model (the model files' "xdit" sections), the rules that follow from
// it, and the launch lines the planner prints for xDiT.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/catalog.h"
#include "core/config_rules.h"
#include "costmodels/calibration.h"
#include "costmodels/dit_ops.h"
#include "costmodels/memory_model.h"
#include "planner/plan.h"
#include "calibration/suite.h"
#include "calibration/validate_suite.h"
#include "planner/launch.h"
#include "simulator/simulate.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = [] {
    auto r = Catalog::Load(DITUNE_TEST_DATA_DIR);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new Catalog(std::move(*r));
  }();
  return *c;
}

bool IsTestModel(const ModelSpec& m) { return m.id.rfind("tiny-", 0) == 0; }

// The facts the support data must state (xDiT README "Supported DiTs" and the launchers).
struct Expected {
  const char* id;
  bool pipefusion;
  bool cfg;
  bool tp;
};
constexpr Expected kExpected[] = {
    {"pixart-alpha", true, true, false},     {"pixart-sigma", true, true, false},
    {"sd3-medium", true, true, false},       {"sd3.5-large", true, true, false},
    {"flux.1-dev", true, false, false},      {"flux.1-schnell", true, false, false},
    {"hunyuandit-v1.2", true, true, false},  {"cogvideox-2b", false, true, false},
    {"cogvideox-5b", false, true, false},    {"cogvideox1.5-5b", false, true, false},
    {"consisid", false, true, false},        {"latte-1", false, false, false},
    {"hunyuanvideo", false, false, false},   {"wan2.1-1.3b", false, false, false},
    {"wan2.1-14b", false, false, false},     {"mochi-1", false, false, false},
    {"sana-1600m", true, true, false},       {"stepvideo-t2v", false, false, true},
};

TEST(RuntimeSupportTest, EveryCatalogModelStatesWhatXditRunsWithSources) {
  int checked = 0;
  for (const auto& m : Cat().models()) {
    if (IsTestModel(m)) continue;
    // A model xDiT's sources do not list is run by another runtime (Wan2.1-I2V-14B by Wan's
    // generate.py).
    if (m.runtime("xdit") == nullptr) {
      EXPECT_FALSE(m.runtimes.empty()) << m.id << " is run by no runtime";
      continue;
    }
    const RuntimeSupport& x = *m.runtime("xdit");
    EXPECT_FALSE(x.command.empty()) << m.id;
    EXPECT_FALSE(x.command_source.empty()) << m.id;
    EXPECT_FALSE(x.split_source.empty()) << m.id;
    for (int i = 0; i < kNumRuntimeMethods; ++i) {
      EXPECT_FALSE(x.methods[i].source.empty()) << m.id << " " << RuntimeMethodKey(static_cast<RuntimeMethod>(i));
    }
    // DistriFusion lives in xDiT's legacy branch only.
    EXPECT_FALSE(x.runs(RuntimeMethod::kDistriFusion)) << m.id;
    ++checked;
  }
  EXPECT_GE(checked, 18);
  for (const Expected& e : kExpected) {
    const ModelSpec* m = *Cat().Model(e.id);
    ASSERT_TRUE(m->runtime("xdit") != nullptr) << e.id;
    EXPECT_EQ(m->runtime("xdit")->runs(RuntimeMethod::kPipeFusion), e.pipefusion) << e.id;
    EXPECT_EQ(m->runtime("xdit")->runs(RuntimeMethod::kCfg), e.cfg) << e.id;
    EXPECT_EQ(m->runtime("xdit")->runs(RuntimeMethod::kTp), e.tp) << e.id;
  }
}

TEST(RuntimeSupportTest, ParserRefusesIncompleteSupportData) {
  auto j = nlohmann::json::parse(R"({"command": "x", "command_source": "s", "flags_source": "s",
      "flags": {"height": "--height", "width": "--width", "steps": "--steps", "ulysses": "--u"},
      "methods": {"ulysses": {"runs": true, "source": "s"}},
      "sequence_split": {"unit": "rows", "source": "s"}})");
  auto r = ParseRuntimeSupport(j, "m.json: xdit", "xdit", "xDiT");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("methods.ring is missing"), std::string::npos) << r.status().message();
  for (const char* k : {"ring", "pipefusion", "cfg", "tp", "dp", "distrifusion"}) {
    j["methods"][k] = {{"runs", false}, {"source", "s"}};
  }
  EXPECT_TRUE(ParseRuntimeSupport(j, "m.json: xdit", "xdit", "xDiT").ok());
  j["methods"]["tp"] = {{"runs", true}, {"source", "s"}};
  r = ParseRuntimeSupport(j, "m.json: xdit", "xdit", "xDiT");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("flags.tp is missing"), std::string::npos) << r.status().message();
  j["methods"]["tp"] = {{"runs", false}, {"source", ""}};
  EXPECT_FALSE(ParseRuntimeSupport(j, "m.json: xdit", "xdit", "xDiT").ok());  // a fact without its source
  j["methods"]["tp"] = {{"runs", false}, {"source", "s"}};
  j["flags"]["bogus"] = "--bogus";
  EXPECT_FALSE(ParseRuntimeSupport(j, "m.json: xdit", "xdit", "xDiT").ok());
}

std::string Join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// Every plan printed for xDiT, for every catalog model on 2, 4, 8 and 16 GPUs of two kinds,
// is one xDiT runs for that model, and its launch line holds only flags its entry point takes.
TEST(RuntimeSupportTest, EveryPlanPrintedForXditIsLaunchable) {
  int plans = 0, launchable = 0;
  for (const auto& m : Cat().models()) {
    if (IsTestModel(m) || m.runtime("xdit") == nullptr) continue;
    std::set<std::string> accepted;
    for (const auto& [key, flag] : m.runtime("xdit")->flags) accepted.insert(flag);
    for (const char* gpu : {"h100-sxm5-80gb", "l40-48gb"}) {
      for (int gpus : {2, 4, 8, 16}) {
        ClusterSpec spec{gpu, gpus};
        if (gpus > 8) spec.inter_id = "ib-ndr";
        auto cluster = ResolveCluster(spec, Cat());
        ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
        Workload w{m.id, m.default_height, m.default_width, m.default_frames, m.default_steps, 1,
                   OutputType::kDecoded};
        PlanOptions opt;
        opt.top_k = 5;
        auto plan = MakePlan(Cat(), w, *cluster, {}, opt);
        if (!plan.ok()) {
          // Only "nothing fits" may stop a plan; never a configuration xDiT cannot run.
          EXPECT_EQ(plan.status().code(), Status::Code::kInfeasible) << m.id << " " << plan.status().ToString();
          continue;
        }
        for (const auto& c : plan->ranked) {
          ++plans;
          ASSERT_TRUE(c.launch.has_value()) << m.id;
          Status runs = CheckRuntimeRuns(m, "xdit", w, c.config, gpus);
          EXPECT_TRUE(runs.ok()) << m.id << " " << Label(c.config) << ": " << runs.message();
          bool ok = runs.ok();
          // The words after the entry point's own command: flag, value, flag, ...
          const std::vector<std::string>& words = c.launch->appended;
          EXPECT_TRUE(c.launch->command.ends_with(Join(words))) << c.launch->command;
          for (size_t i = 0; i < words.size(); ++i) {
            if (words[i].rfind("--", 0) != 0) continue;
            if (!accepted.count(words[i])) {
              ok = false;
              ADD_FAILURE() << m.id << ": " << words[i] << " is not a flag of " << m.runtime("xdit")->command;
            }
          }
          launchable += ok;
        }
      }
    }
  }
  EXPECT_GT(plans, 300);
  EXPECT_EQ(launchable, plans);
  std::cout << "xDiT plans launchable as printed: " << launchable << " of " << plans << "\n";
}

// Planning never refuses what it ranked: every catalog model xDiT runs, on 1 to 8 GPUs of one
// node and on every whole number of nodes of 8 up to 128 GPUs, at its default size and at three
// sizes whose patch rows split unevenly (PipeFusion patch counts xDiT recomputes), plans or says
// nothing fits.
TEST(RuntimeSupportTest, PlansOnManyNodesAndOddSizesAreLaunchable) {
  int plans = 0, infeasible = 0;
  for (const auto& m : Cat().models()) {
    if (IsTestModel(m) || m.runtime("xdit") == nullptr) continue;
    const int unit = m.vae_spatial * m.patch_spatial;
    const std::vector<std::pair<int, int>> sizes = {
        {m.default_height, m.default_width}, {20 * unit, 20 * unit}, {17 * unit, 64 * unit}, {45 * unit, 81 * unit}};
    for (const auto& [h, w] : sizes) {
      Workload work{m.id, h, w, m.default_frames, m.default_steps, 1, OutputType::kLatent};
      if (!ComputeTokenGeometry(m, work).ok() || !RuntimeRunsWorkload(m, "xdit", work).ok()) continue;
      std::vector<int> counts = {1, 2, 3, 4, 5, 6, 7, 8};
      for (int n = 16; n <= 128; n += 8) counts.push_back(n);
      for (int gpus : counts) {
        ClusterSpec spec{"h100-sxm5-80gb", gpus};
        if (gpus > 8) {
          spec.gpus_per_node = 8;
          spec.inter_id = "ib-ndr";
        }
        auto cluster = ResolveCluster(spec, Cat());
        ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
        PlanOptions opt;
        opt.top_k = 3;
        auto plan = MakePlan(Cat(), work, *cluster, {}, opt);
        if (!plan.ok()) {
          EXPECT_EQ(plan.status().code(), Status::Code::kInfeasible)
              << m.id << " " << h << "x" << w << " on " << gpus << ": " << plan.status().ToString();
          ++infeasible;
          continue;
        }
        for (const auto& c : plan->ranked) {
          ++plans;
          Status runs = CheckRuntimeRuns(m, "xdit", work, c.config, gpus);
          EXPECT_TRUE(runs.ok()) << m.id << " " << h << "x" << w << " " << Label(c.config) << ": " << runs.message();
        }
      }
    }
  }
  EXPECT_GT(plans, 1000);
  std::cout << "plans on 1-128 GPUs at default and odd sizes: " << plans << " ranked, " << infeasible
            << " where nothing fits\n";
}

// xDiT recomputes a patch count that leaves uneven rows; an entry point without a patch flag
// runs the recomputed count, which is the same launch as the stage count.
TEST(RuntimeSupportTest, RecomputedPatchCountsLaunchWithoutAPatchFlag) {
  const ModelSpec* flux = *Cat().Model("flux.1-dev");
  ASSERT_EQ(flux->runtime("xdit")->flag("patches"), nullptr);
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  auto tokens = *ComputeTokenGeometry(*flux, w);
  // 64 patch rows, sp 2, 12 stages: 64 / 24 rounded up to 3 rows per rank, 6 per patch: 11.
  const ParallelConfig runs = XditRunsAs(tokens, 28, *ParseParallelConfig("ulysses=2,pipefusion=12"));
  EXPECT_EQ(runs.patches, 11);
  EXPECT_TRUE(CheckRuntimeRuns(*flux, "xdit", w, runs, 24).ok());
  EXPECT_TRUE(CheckRuntimeRuns(*flux, "xdit", w, *ParseParallelConfig("ulysses=2,pipefusion=12"), 24).ok());
  Status other = CheckRuntimeRuns(*flux, "xdit", w, *ParseParallelConfig("ulysses=2,pipefusion=12,patches=10"), 24);
  EXPECT_NE(other.message().find("recomputed to 11"), std::string::npos) << other.message();
  ClusterSpec spec{"h100-sxm5-80gb", 24, 8, 0, "", "ib-ndr"};
  auto plan = MakePlan(Cat(), w, *ResolveCluster(spec, Cat()), {}, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->ranked.front().launch.has_value());
}

ValidationContext XditContext(const char* id, int h, int w, int frames, int gpus, TokenGeometry* tokens) {
  const ModelSpec* m = *Cat().Model(id);
  *tokens = *ComputeTokenGeometry(*m, {id, h, w, frames, m->default_steps, 1, OutputType::kDecoded});
  ValidationContext ctx{m, *tokens, m->default_steps, 1, gpus};
  ctx.runtime = "xdit";
  return ctx;
}

std::string Refusal(const ValidationContext& ctx, const char* config) {
  Status s = ValidateConfig(ctx, *ParseParallelConfig(config));
  return s.ok() ? "" : s.message();
}

TEST(RuntimeSupportTest, RefusalsNameTheRuleTheSourceAndTheNearestLaunchable) {
  TokenGeometry t;
  // Flux: no tensor parallelism in xDiT (README: TP ❎).
  ValidationContext flux = XditContext("flux.1-dev", 1024, 1024, 1, 8, &t);
  std::string msg = Refusal(flux, "tp=2,ulysses=4");
  EXPECT_NE(msg.find("xDiT has no tensor parallelism for flux.1-dev"), std::string::npos) << msg;
  EXPECT_NE(msg.find("README"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nearest launchable: ulysses=8"), std::string::npos) << msg;
  EXPECT_NE(Refusal(flux, "distrifusion=8").find("legacy"), std::string::npos);
  EXPECT_NE(Refusal(flux, "ulysses=4,cfg=2").find("cfg-needs-guidance"), std::string::npos);
  // ditune's executor runs tp for Flux.
  ValidationContext own = flux;
  own.runtime = {};
  EXPECT_TRUE(ValidateConfig(own, *ParseParallelConfig("tp=2,ulysses=4")).ok());

  // Latte 480x720: xDiT splits the 30 patch rows, so ring=8 is refused (ditune's executor
  // splits the 16 frames instead).
  ValidationContext latte = XditContext("latte-1", 480, 720, 16, 8, &t);
  msg = Refusal(latte, "ring=8");
  EXPECT_NE(msg.find(kRuleSpRows), std::string::npos) << msg;
  latte.runtime = {};
  EXPECT_TRUE(ValidateConfig(latte, *ParseParallelConfig("ring=8")).ok());

  // Published or launchable configurations that xDiT runs.
  ValidationContext step = XditContext("stepvideo-t2v", 544, 992, 204, 8, &t);
  EXPECT_EQ(t.image_tokens(), 36 * 34 * 62);
  EXPECT_EQ(Refusal(step, "ulysses=8"), "");
  EXPECT_EQ(Refusal(step, "ulysses=4,tp=2"), "");
  EXPECT_NE(Refusal(step, "ring=8").find("Ring sequence parallelism"), std::string::npos);
  EXPECT_NE(Refusal(step, "cfg=2,ulysses=4").find("runtime-runs-method"), std::string::npos);
  EXPECT_EQ(Refusal(XditContext("mochi-1", 480, 848, 163, 8, &t), "ulysses=8"), "");
  EXPECT_EQ(Refusal(XditContext("wan2.1-1.3b", 480, 832, 81, 8, &t), "ulysses=4,ring=2"), "");
  EXPECT_EQ(Refusal(XditContext("wan2.1-1.3b", 480, 832, 81, 8, &t), "ring=8"), "");
  EXPECT_EQ(Refusal(XditContext("hunyuanvideo", 544, 960, 129, 8, &t), "ulysses=8"), "");
  // The runner takes no --num_pipeline_patch: Flux's PipeFusion runs as many patches as stages.
  EXPECT_NE(Refusal(flux, "pipefusion=2,patches=4,ulysses=4").find("takes no patch count"), std::string::npos);
  EXPECT_EQ(Refusal(flux, "pipefusion=2,ulysses=4"), "");
}

TEST(RuntimeSupportTest, PatchCountsAndWarmupAreAdjustedAsXditAdjustsThem) {
  TokenGeometry t;
  // PixArt 1024^2: 64 patch rows. pipefusion=2 with 5 patches and sp 4: the patch height
  // ceil(64 / 5) = 13 rows rounded up to 16 (a multiple of sp 4): ceil(64 / 16) = 4 patches.
  ValidationContext pixart = XditContext("pixart-alpha", 1024, 1024, 1, 8, &t);
  ParallelConfig c = *ParseParallelConfig("pipefusion=2,patches=5,ulysses=4,warmup=40");
  EXPECT_EQ(Refusal(pixart, "pipefusion=2,patches=5,ulysses=4"), "");
  pixart.runtime = {};  // ditune's executor needs whole rows per patch
  EXPECT_NE(Refusal(pixart, "pipefusion=2,patches=5,ulysses=4").find(kRulePatches), std::string::npos);
  const ParallelConfig runs = XditRunsAs(t, 20, c);
  EXPECT_EQ(runs.patches, 4);
  EXPECT_EQ(runs.warmup, 20);
  // 6 patches of sp 2: 11 rows rounded to 12, ceil(64 / 12) = 6 (the last one shorter).
  EXPECT_EQ(XditRunsAs(t, 20, *ParseParallelConfig("pipefusion=4,patches=6,ulysses=2")).patches, 6);
  // A count that splits the rows stays.
  EXPECT_EQ(XditRunsAs(t, 20, *ParseParallelConfig("pipefusion=4,ulysses=2")).patches, 4);
}

TEST(RuntimeSupportTest, LaunchLinesFollowEachEntryPoint) {
  auto line = [](const char* id, int gpus, const char* config, Workload w = {}) {
    const ModelSpec* m = *Cat().Model(id);
    if (w.model_id.empty()) w = {id, m->default_height, m->default_width, m->default_frames, m->default_steps, 1};
    ClusterSpec spec{"h100-sxm5-80gb", gpus};
    if (gpus > 8) spec.inter_id = "ib-ndr";
    auto l = MakeLaunch(*m, "xdit", w, *ResolveCluster(spec, Cat()), *ParseParallelConfig(config));
    EXPECT_TRUE(l.ok()) << id << ": " << l.status().ToString();
    return l.ok() ? l->command : std::string();
  };
  EXPECT_EQ(line("flux.1-dev", 8, "ulysses=8"),
            "torchrun --nproc_per_node=8 $(which xdit) --model FLUX.1-dev --height 1024 --width 1024 "
            "--num_inference_steps 28 --ulysses_degree 8");
  EXPECT_EQ(line("stepvideo-t2v", 8, "ulysses=4,tp=2"),
            "torchrun --nproc_per_node=8 run_parallel.py --model_dir $STEPVIDEO_MODEL_DIR --vae_url $VAE_URL "
            "--caption_url $CAPTION_URL --height 544 --width 992 --num_frames 204 --infer_steps 50 "
            "--ulysses_degree 4 --tensor_parallel_degree 2");
  EXPECT_EQ(line("mochi-1", 4, "ulysses=2,ring=2"),
            "CUDA_VISIBLE_DEVICES=0,1,2,3 python3 demos/cli.py --use_xdit --model_dir $MOCHI_WEIGHTS --height 480 "
            "--width 848 --num_frames 163 --num_steps 64 --ulysses_degree 2 --ring_degree 2");
  // Two nodes: one torchrun per node with the job's rendezvous.
  EXPECT_NE(line("flux.1-dev", 16, "ulysses=8,ring=2").find("torchrun --nnodes=2 --node_rank=$NODE_RANK"),
            std::string::npos);
  // Latte's script fixes 16 frames.
  const ModelSpec* latte = *Cat().Model("latte-1");
  Status frames = RuntimeRunsWorkload(*latte, "xdit", {"latte-1", 512, 512, 32, 50, 1});
  ASSERT_FALSE(frames.ok());
  EXPECT_NE(frames.message().find("always generates 16 frames"), std::string::npos) << frames.message();
}

TEST(LatteTest, SpatialAndTemporalBlocksArePricedByTheirAttention) {
  const ModelSpec& m = **Cat().Model("latte-1");
  EXPECT_EQ(m.num_blocks(BlockFamily::kSpatial), 28);
  EXPECT_EQ(m.num_blocks(BlockFamily::kTemporal), 28);
  EXPECT_EQ(m.family_of(0), BlockFamily::kSpatial);
  EXPECT_EQ(m.family_of(1), BlockFamily::kTemporal);
  // Parameters from the shapes: 28 x 16 H^2 + 28 x 12 H^2 (+ embeddings) ~ 1.06 B.
  EXPECT_NEAR(DitParams(m) / 1e9, 1.06, 0.06);
  const Workload w{"latte-1", 512, 512, 16, 50, 1, OutputType::kDecoded};
  const TokenGeometry t = *ComputeTokenGeometry(m, w);
  const RankWork work = ComputeRankWork(m, t, w, ParallelConfig{});
  auto attn = [&](BlockFamily f, const char* name) {
    for (const auto& op : BlockOps(m, f, work)) {
      if (op.name == name) return op.flops.value();
    }
    return -1.0;
  };
  const double n = 16.0 * 32 * 32, frame = 32.0 * 32, d = 72, heads = 16, b = 2;  // CFG: 2 sequences
  EXPECT_DOUBLE_EQ(attn(BlockFamily::kSpatial, "attn"), 4 * b * n * frame * heads * d);
  EXPECT_DOUBLE_EQ(attn(BlockFamily::kTemporal, "attn"), 4 * b * n * 16 * heads * d);
  EXPECT_GT(attn(BlockFamily::kSpatial, "cross_attn"), 0);
  EXPECT_EQ(attn(BlockFamily::kTemporal, "cross_attn"), -1.0);  // none
  // ditune's executor does not run these blocks yet, and says so.
  EXPECT_EQ(ExecutorRunsModel(m).ExitCode(), 2);
}

TEST(ParallelConfigTest, DegreeProductsThatOverflowAreRefused) {
  for (const char* bad : {"tp=65536,ulysses=65536", "ulysses=65536,ring=65536",
                          "--tensor_parallel_degree 65536 --ulysses_degree 65536"}) {
    auto c = ParseParallelConfig(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().ExitCode(), 2);
    EXPECT_NE(c.status().message().find("multiply to more than"), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

TEST(FullyShardTest, ShardedWeightsAreXditsAndChosenWhereTheyMakeAPlanFit) {
  auto c = ParseParallelConfig("ulysses=4,fsdp=4");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->world_size(), 4);  // fsdp adds no devices
  EXPECT_EQ(ToString(*c), "ulysses=4,fsdp=4");
  EXPECT_EQ(*ParseParallelConfig("--ulysses_degree 4 --fully_shard_degree 4"), *c);

  TokenGeometry t;
  ValidationContext flux = XditContext("flux.1-dev", 1024, 1024, 1, 4, &t);
  EXPECT_EQ(Refusal(flux, "ulysses=4,fsdp=4"), "");
  EXPECT_NE(Refusal(flux, "ulysses=4,fsdp=3").find(kRuleFsdp), std::string::npos);
  flux.runtime = {};
  EXPECT_NE(Refusal(flux, "ulysses=4,fsdp=4").find("ditune's engine keeps whole weights"), std::string::npos);
  EXPECT_NE(Refusal(XditContext("hunyuanvideo", 544, 960, 129, 4, &t), "ulysses=4,fsdp=4").find("fully-sharded"),
            std::string::npos);

  // The weights on a rank: a quarter, plus two blocks gathered whole.
  const ModelSpec& m = **Cat().Model("flux.2-dev");
  const Workload w{"flux.2-dev", 1024, 1024, 1, 50, 1, OutputType::kDecoded};
  const TokenGeometry tf = *ComputeTokenGeometry(m, w);
  const GpuSpec& h100 = **Cat().Gpu("h100-sxm5-80gb");
  const double whole = RankMemory(m, tf, w, *ParseParallelConfig("ulysses=4"), h100, {}).weights.value();
  const double sharded = RankMemory(m, tf, w, *ParseParallelConfig("ulysses=4,fsdp=4"), h100, {}).weights.value();
  EXPECT_NEAR(whole, m.published_params * 2, 1e6);
  EXPECT_LT(sharded, 0.35 * whole);
  EXPECT_GT(sharded, 0.25 * whole);

  // FLUX.2-dev (32 B) on 4 H100s: only sharded weights (or PipeFusion's split) fit; the plan
  // shards where that makes a configuration fit, and the launch line says so.
  PlanOptions opt;
  opt.top_k = 10;
  auto plan = MakePlan(Cat(), w, *ResolveCluster({"h100-sxm5-80gb", 4}, Cat()), {}, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  bool sharded_plan = false;
  for (const auto& cand : plan->ranked) {
    if (cand.config.fsdp == 1) continue;
    sharded_plan = true;
    EXPECT_NE(cand.launch->command.find(fmt::format("--fully_shard_degree {}", cand.config.fsdp)), std::string::npos)
        << cand.launch->command;
    EXPECT_GT(cand.result.steady.exposed_comm.value(), 0);
  }
  EXPECT_TRUE(sharded_plan);
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

// Model CPU offload: xDiT's --enable_model_cpu_offload keeps the text encoders, the DiT and
// the VAE on the GPU each only while it runs. xDiT's HunyuanVideo tables on 48 GB L20s ran so
// (docs/performance/hunyuanvideo.md; the example's launch lines pass the flag).
TEST(CpuOffloadTest, OffloadIsXditsAndItsTurnsAndMovesArePriced) {
  auto c = ParseParallelConfig("ulysses=2,offload=1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->world_size(), 2);  // no devices of its own
  EXPECT_EQ(ToString(*c), "ulysses=2,offload=1");
  EXPECT_EQ(*ParseParallelConfig("--ulysses_degree 2 --enable_model_cpu_offload"), *c);
  EXPECT_NE(ToXditFlags(*c).find("--enable_model_cpu_offload"), std::string::npos);
  EXPECT_EQ(ParseParallelConfig("offload=2").status().ExitCode(), 2);
  EXPECT_EQ(ParseParallelConfig("--enable_model_cpu_offload=1").status().ExitCode(), 2);

  TokenGeometry t;
  ValidationContext hv = XditContext("hunyuanvideo", 720, 1280, 129, 2, &t);
  EXPECT_EQ(Refusal(hv, "ulysses=2,offload=1"), "");
  hv.runtime = {};
  EXPECT_NE(Refusal(hv, "ulysses=2,offload=1").find(kRuleOffload), std::string::npos);
  // PixArt's entry point has no offload flag.
  EXPECT_NE(Refusal(XditContext("pixart-alpha", 1024, 1024, 1, 2, &t), "cfg=2,offload=1").find(kRuleRuntimeMethod),
            std::string::npos);

  // HunyuanVideo 720p x 129 on one 48 GB L20: the whole pipeline does not fit; offloaded, the
  // peak is the runtime and the largest turn: the DiT with its working set.
  const ModelSpec& m = **Cat().Model("hunyuanvideo");
  const Workload w{"hunyuanvideo", 720, 1280, 129, 50, 1, OutputType::kDecoded};
  const TokenGeometry tokens = *ComputeTokenGeometry(m, w);
  const GpuSpec& l20 = **Cat().Gpu("l20-48gb");
  MemoryOptions xdit;
  xdit.placement = m.runtime("xdit")->memory;  // its example scripts decode tile by tile
  const MemoryBreakdown whole = RankMemory(m, tokens, w, ParallelConfig{}, l20, xdit);
  ParallelConfig off;
  off.offload = 1;
  const MemoryBreakdown turns = RankMemory(m, tokens, w, off, l20, xdit);
  EXPECT_FALSE(whole.fits());
  EXPECT_TRUE(turns.fits());
  EXPECT_EQ(turns.encoders.value(), 0.0);
  EXPECT_NEAR(turns.text_encoder_weights.value(), m.text_encoder_params() * 2, 1.0);
  EXPECT_NEAR(turns.peak().value(),
              (turns.runtime + turns.weights + turns.activations + turns.attention + turns.comm_buffers).value(), 1.0);
  // What crosses the host link: the encoders there and back and the DiT there before the
  // loop; the DiT back and the VAE there and back after it.
  const OffloadTraffic moves = OffloadMoves(m, off);
  EXPECT_NEAR(moves.before_loop.value(), 2 * (2 * m.text_encoder_params() + m.published_params), 1.0);
  EXPECT_NEAR(moves.after_loop.value(), 2 * (m.published_params + 2 * m.vae_decoder_params), 1.0);
  EXPECT_EQ(OffloadMoves(m, ParallelConfig{}).before_loop.value(), 0.0);

  // The simulation adds them at half the host link's nominal rate (pageable copies), before
  // the loop and after it; the loop itself is unchanged.
  const Cluster one = *ResolveCluster({"l20-48gb", 1}, Cat());
  auto models = MakeCostModels(one, {});
  ASSERT_TRUE(models.ok());
  auto run = [&](const ParallelConfig& config) {
    SimOptions sim;
    sim.memory = xdit;
    auto r = Simulate({&m, w, &one, config, &models->compute, models->comm.get()}, sim);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  };
  const SimResult plain = run(ParallelConfig{});
  const SimResult offloaded = run(off);
  const double rate = 31.5e9 * 0.5;
  EXPECT_FALSE(plain.fits);
  EXPECT_TRUE(offloaded.fits);
  EXPECT_NEAR(offloaded.text_encode.value() - plain.text_encode.value(), moves.before_loop.value() / rate, 1e-6);
  EXPECT_NEAR(offloaded.vae_decode.value() - plain.vae_decode.value(), moves.after_loop.value() / rate, 1e-6);
  EXPECT_NEAR(offloaded.dit.value(), plain.dit.value(), 1e-6);

  // The planner offloads where nothing fits whole, and the launch line passes the flag.
  auto plan = MakePlan(Cat(), w, *ResolveCluster({"l20-48gb", 2}, Cat()), {}, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->ranked.front().config.offload, 1);
  EXPECT_NE(plan->ranked.front().launch->command.find("--enable_model_cpu_offload"), std::string::npos)
      << plan->ranked.front().launch->command;
  ASSERT_TRUE(plan->single_gpu.has_value());
  EXPECT_EQ(plan->single_gpu->config.offload, 1);
  // Where the whole pipeline fits, it is not offloaded.
  auto h100 = MakePlan(Cat(), w, *ResolveCluster({"h100-sxm5-80gb", 2}, Cat()), {}, PlanOptions{});
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  for (const auto& cand : h100->ranked) EXPECT_EQ(cand.config.offload, 0) << Label(cand.config);
}

// A published run that ran is predicted with offload where only that fits; a published OOM
// is not rescued by it.
TEST(CpuOffloadTest, APublishedRunThatOnlyFitsOffloadedIsPredicted) {
  const std::string header =
      "group,model,height,width,frames,steps,scope,gpu,gpus,nodes,gpus_per_node,intra,inter,config,role,latency_s,"
      "source\n";
  const std::string rows =
      "hv,hunyuanvideo,720,1280,129,50,e2e,l20-48gb,1,1,8,pcie4,none,,calibrate,6043.88,s\n"
      "hv,hunyuanvideo,720,1280,129,50,e2e,l20-48gb,2,1,8,pcie4,none,ulysses=2,predict,3271.44,s\n"
      "hv,hunyuanvideo,720,1280,129,50,e2e,l20-48gb,2,1,8,pcie4,none,ring=2,predict,OOM,s\n";
  auto suite = ParseSuite(header + rows, "test", Cat());
  ASSERT_TRUE(suite.ok()) << suite.status().ToString();
  auto report = PredictSuite(*suite, Cat(), {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->rows.size(), 3u);
  EXPECT_EQ(report->rows[1].config, "ulysses=2,offload=1");
  ASSERT_TRUE(report->rows[1].predicted_s.has_value());
  EXPECT_LT(*report->rows[1].ape, 0.1);
  EXPECT_FALSE(report->rows[2].feasible);
  EXPECT_EQ(report->summary.oom_agree, 1);
}

}  // namespace
}  // namespace ditune
