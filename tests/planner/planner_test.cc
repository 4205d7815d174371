#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodels/memory_model.h"
#include "store/store.h"
#include "planner/auto_configure.h"
#include "core/enumerate.h"
#include "planner/gpu_launch.h"
#include "planner/plan.h"
#include "calibration/predict.h"
#include "calibration/recalibrate.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

TEST(PlanTest, MemoryPruningRemovesExactlyWhatDoesNotFit) {
  // Wan 14B at 720p on 24 GB cards: only splits of the weights (tp, PipeFusion) can fit,
  // which ditune's executor runs (xDiT runs neither for Wan).
  const Cluster cluster = *ResolveCluster({"rtx4090-24gb", 8}, Cat());
  Workload w{"wan2.1-14b", 720, 1280, 81, 50, 1, OutputType::kLatent};
  PlanOptions opt;
  opt.runtime = "ditune";
  opt.top_k = 1000;
  auto plan = MakePlan(Cat(), w, cluster, {}, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const ModelSpec* m = *Cat().Model("wan2.1-14b");
  const TokenGeometry t = *ComputeTokenGeometry(*m, w);
  ValidationContext ctx{m, t, 50, 1, 8};
  int rejected = 0;
  std::set<std::string> kept;
  for (const auto& c : plan->ranked) kept.insert(ToString(c.config));
  for (const auto& c : EnumerateConfigs(ctx, cluster, opt.enumerate)) {
    const bool fits = RankMemory(*m, t, w, c, *cluster.gpu, opt.sim.memory).fits();
    rejected += !fits;
    if (!fits) {
      EXPECT_FALSE(kept.count(ToString(c))) << ToString(c);
    }
  }
  EXPECT_EQ(plan->pruned_memory, rejected);
  EXPECT_GT(rejected, 0);
  for (const auto& c : plan->ranked) EXPECT_TRUE(c.result.fits);
}

// A configuration that fits only sharded or offloaded is ranked once, as its fastest variant
// that fits, and the ranking is the same on any number of host threads.
TEST(PlanTest, EachConfigurationRankedOnceOnAnyThreadCount) {
  ClusterSpec spec{"l40-48gb", 16};
  spec.inter_id = "ib-ndr";
  const Cluster cluster = *ResolveCluster(spec, Cat());
  Workload w{"qwen-image-edit", 1024, 1024, 1, 50, 1, OutputType::kDecoded};
  PlanOptions opt;
  opt.top_k = 1000;
  std::vector<std::string> labels[2];
  for (int threads : {1, 2}) {
    setenv("DITUNE_THREADS", std::to_string(threads).c_str(), 1);
    auto plan = MakePlan(Cat(), w, cluster, {}, opt);
    unsetenv("DITUNE_THREADS");
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    std::set<std::string> bases;
    int variants = 0;
    for (const auto& c : plan->ranked) {
      ParallelConfig base = c.config;
      variants += base.fsdp > 1 || base.offload;
      base.fsdp = 1;
      base.offload = 0;
      EXPECT_TRUE(bases.insert(ToString(base)).second) << "ranked twice: " << ToString(base);
      labels[threads - 1].push_back(fmt::format("{} {:.17g}", ToString(c.config), c.result.total.value()));
    }
    EXPECT_GT(variants, 0) << "the case no longer exercises sharded or offloaded variants";
  }
  EXPECT_EQ(labels[0], labels[1]);
}

TEST(PlanTest, InfeasibleSaysWhatTheSmallestNeeds) {
  const Cluster cluster = *ResolveCluster({"a10-24gb", 1}, Cat());
  Workload w{"stepvideo-t2v", 544, 992, 201, 50, 1, OutputType::kDecoded};
  auto plan = MakePlan(Cat(), w, cluster, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().ExitCode(), 3);
  EXPECT_NE(plan.status().message().find("the smallest (1 device) needs"), std::string::npos) << plan.status().ToString();
  // The blocker and its phase are named.
  EXPECT_NE(plan.status().message().find("at its peak (denoising) the largest part is the DiT's weights"),
            std::string::npos)
      << plan.status().ToString();
}

TEST(PlanTest, ObjectivesRankDifferently) {
  const Cluster cluster = *ResolveCluster({"l40-48gb", 8}, Cat());
  Workload w{"sd3-medium", 1024, 1024, 1, 28, 8, OutputType::kDecoded};
  PlanOptions lat, thr;
  thr.objective = Objective::kThroughput;
  auto a = MakePlan(Cat(), w, cluster, {}, lat);
  auto b = MakePlan(Cat(), w, cluster, {}, thr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LE(a->ranked[0].result.total.value(), b->ranked[0].result.total.value());
  EXPECT_GE(b->ranked[0].images_per_s, a->ranked[0].images_per_s);
  EXPECT_GT(b->ranked[0].config.dp, 1);  // a batch of 8 prompts: serve them side by side
  for (size_t i = 1; i < a->ranked.size(); ++i) {
    EXPECT_LE(a->ranked[i - 1].result.total.value(), a->ranked[i].result.total.value());
  }
  EXPECT_TRUE(a->single_gpu.has_value());
  EXPECT_FALSE(a->explanation.empty());
  auto j = PlanToJson(*a);
  EXPECT_EQ(j["ranked"].size(), a->ranked.size());
  EXPECT_TRUE(j["ranked"][0].contains("speedup"));
}

// An eager winner whose steps mostly wait for the host says what torch.compile would make of
// the same configuration: the compiled plan's own price for it. A compiled plan says nothing.
TEST(PlanTest, AHostBoundEagerWinnerNamesItsCompiledPrice) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  PlanOptions eager, compiled;
  eager.top_k = 1000;
  compiled.top_k = 1000;
  compiled.launch.torch_compile = true;
  auto a = MakePlan(Cat(), w, cluster, {}, eager);
  auto b = MakePlan(Cat(), w, cluster, {}, compiled);
  ASSERT_TRUE(a.ok() && b.ok());
  const Candidate& best = a->ranked.front();
  ASSERT_GT(best.result.steady.host_wait.value(), 0.2 * best.result.step.value())
      << "the case no longer has a host-bound winner";
  const Candidate* same = nullptr;
  for (const auto& c : b->ranked) {
    if (ToString(c.config) == ToString(best.config)) same = &c;
  }
  ASSERT_NE(same, nullptr);
  const std::string want = fmt::format("compiled (xDiT's --use_torch_compile), the same configuration is priced at {:.3f} s",
                                       same->result.total.value());
  int found = 0;
  for (const auto& line : a->explanation) found += line.find(want) != std::string::npos;
  EXPECT_EQ(found, 1) << "no line says: " << want;
  for (const auto& line : b->explanation) EXPECT_EQ(line.find("compiled ("), std::string::npos) << line;
}

// A plan for ditune's engine is priced as the engine runs (no Python glue, one kernel per
// op, its own scale), so the same workload is predicted faster and may rank differently;
// the executor is part of the plan and of its cache key. On CPU ranks ditune's executor is
// the CPU one, priced as before.
TEST(PlanTest, PlansForDitunesEngineArePricedAsTheEngine) {
  const Cluster h100 = *ResolveCluster({"h100-sxm5-80gb", 4}, Cat());
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  PlanOptions xdit, ditune;
  ditune.runtime = "ditune";
  auto a = MakePlan(Cat(), w, h100, {}, xdit);
  auto b = MakePlan(Cat(), w, h100, {}, ditune);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->runtime, "ditune");
  EXPECT_EQ(PlanToJson(*b)["executor"], "ditune");
  EXPECT_EQ(PlanToJson(*a)["executor"], "xdit");
  // The engine's prediction of its own winner, and the single GPU, come from SimulateEngineRun's models.
  auto engine = ModelsFor(h100, "flux.1-dev", {}, "cuda", Runtime::kEngine);
  ASSERT_TRUE(engine.ok());
  SimInput in{*Cat().Model("flux.1-dev"), w, &h100, b->ranked[0].config, &engine->compute, engine->comm.get()};
  SimOptions so;
  so.terms = engine->terms;
  auto sim = Simulate(in, so);
  ASSERT_TRUE(sim.ok());
  EXPECT_NEAR(b->ranked[0].result.total.value(), sim->total.value(), 1e-9 * sim->total.value());
  ASSERT_TRUE(a->single_gpu && b->single_gpu);
  EXPECT_LT(b->single_gpu->result.total.value(), a->single_gpu->result.total.value());
  EXPECT_NE(PlanCacheKey(w, h100, xdit), PlanCacheKey(w, h100, ditune));
  auto run = DituneRunCommand("ditune", w, b->ranked[0].config, h100);
  EXPECT_EQ(run[4], "run");
  EXPECT_EQ(run[5], "--backend");
  EXPECT_EQ(run[6], "cuda");

  const Cluster cpu = *ResolveCluster({"cpu", 2}, Cat());
  Workload tiny{"tiny-pixart", 256, 256, 1, 4, 1, OutputType::kLatent};
  auto c = MakePlan(Cat(), tiny, cpu, {}, xdit);
  auto d = MakePlan(Cat(), tiny, cpu, {}, ditune);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_EQ(c->ranked[0].result.total.value(), d->ranked[0].result.total.value());
  EXPECT_EQ(ParseRuntimeChoice(Cat(), "torch").status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(ParseRuntimeChoice(Cat(), "torch").status().message().find("xdit"), std::string::npos);
  EXPECT_EQ(*ParseRuntimeChoice(Cat(), "any"), "any");
}

TEST(PlanTest, XditFlagsOfTheWinnerParseBack) {
  const Cluster cluster = *ResolveCluster({"a100-sxm4-80gb", 8}, Cat());
  Workload w{"pixart-alpha", 2048, 2048, 1, 20, 1, OutputType::kDecoded};
  auto plan = MakePlan(Cat(), w, cluster, {});
  ASSERT_TRUE(plan.ok());
  for (const auto& c : plan->ranked) {
    ASSERT_TRUE(c.launch.has_value());
    EXPECT_TRUE(SupportedByXdit(c.config).ok());
    EXPECT_EQ(*ParseParallelConfig(ToXditFlags(c.config)), c.config) << ToXditFlags(c.config);
    // PixArt's example script takes xDiT's standard flags: the plan's flags parse back too.
    EXPECT_EQ(*ParseParallelConfig(c.launch->parallel_flags), c.config) << c.launch->parallel_flags;
  }
}

TEST(AutoConfigureTest, CachesPerCalibrationVersion) {
  const std::string db = std::string(DITUNE_TEST_TMP_DIR) + "/auto.db";
  std::filesystem::remove(db);
  AutoConfigureOptions opt;
  opt.db_path = db;
  bool cached = true;
  opt.from_cache = &cached;
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  auto first = AutoConfigure(w, {"h100-sxm5-80gb", 4}, opt);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(cached);
  auto second = AutoConfigure(w, {"h100-sxm5-80gb", 4}, opt);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(cached);
  EXPECT_EQ(ToString(second->ranked[0].config), ToString(first->ranked[0].config));
  EXPECT_EQ(second->enumerated, first->enumerated);
  // A new calibration invalidates the cached ranking.
  {
    auto store = std::move(Store::Open(db)).value();
    Fit f;
    f.kind = "comm";
    f.key = "all_to_all/nvlink4";
    f.params = PiecewiseLatencyModel({{1, 1e12, 5e-5, 1e10}}).ToJson();
    ASSERT_TRUE(store->ReplaceFit(f).ok());
  }
  auto third = AutoConfigure(w, {"h100-sxm5-80gb", 4}, opt);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(cached);
  // Bad input is a clear error.
  auto bad = AutoConfigure({"flux.1-dev", 1000, 1024, 1, 28, 1, OutputType::kDecoded}, {"h100-sxm5-80gb", 4}, opt);
  EXPECT_EQ(bad.status().ExitCode(), 2);
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

TEST(LaunchTest, MapsDriverNamesToTheCatalog) {
  EXPECT_EQ(*MapGpuName("NVIDIA H100 80GB HBM3", Cat()), "h100-sxm5-80gb");
  EXPECT_EQ(*MapGpuName("NVIDIA H20", Cat()), "h20-96gb");
  EXPECT_EQ(*MapGpuName("NVIDIA H200", Cat()), "h200-sxm-141gb");
  EXPECT_EQ(*MapGpuName("NVIDIA L40S", Cat()), "l40s-48gb");
  EXPECT_EQ(*MapGpuName("NVIDIA L40", Cat()), "l40-48gb");
  EXPECT_EQ(*MapGpuName("NVIDIA A100-SXM4-80GB", Cat()), "a100-sxm4-80gb");
  EXPECT_EQ(*MapGpuName("NVIDIA B200", Cat()), "b200-180gb");
  EXPECT_EQ(*MapGpuName("NVIDIA GeForce RTX 5090", Cat()), "rtx5090-32gb");
  auto unknown = MapGpuName("NVIDIA B300", Cat());
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("pass --gpu"), std::string::npos);
}

TEST(LaunchTest, DetectsFromNvidiaSmi) {
  const CommandRunner fake = [](const std::string& cmd) -> StatusOr<std::string> {
    if (cmd.find("--query-gpu") != std::string::npos) {
      return std::string("NVIDIA L40, 46068\nNVIDIA L40, 46068\nNVIDIA L40, 46068\nNVIDIA L40, 46068\n");
    }
    return std::string(
        "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n"
        "GPU0\t X \tPIX\tSYS\tSYS\t0-31\n"
        "GPU1\tPIX\t X \tSYS\tSYS\t0-31\n"
        "GPU2\tSYS\tSYS\t X \tPIX\t32-63\n"
        "GPU3\tSYS\tSYS\tPIX\t X \t32-63\n");
  };
  auto d = DetectGpus(Cat(), fake);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->count, 4);
  EXPECT_EQ(d->gpu_id, "l40-48gb");
  EXPECT_FALSE(d->nvlink);
  EXPECT_TRUE(d->two_sockets);
  EXPECT_EQ(d->intra_id, "pcie4");
  // The whole matrix, for the launch's own layout: two sockets, a switch of two on each.
  ASSERT_NE(d->topology, nullptr);
  EXPECT_EQ(d->topology->gpus, 4);
  EXPECT_EQ(Summarize(*d->topology).sockets.size(), 2u);
  auto box = LinkForTopology(*d->topology, **Cat().Gpu("l40-48gb"), Cat());
  ASSERT_TRUE(box.ok());
  EXPECT_EQ(box->gpus_per_switch, 2);
  EXPECT_EQ(box->box_gpus, 4);
  const CommandRunner none = [](const std::string&) -> StatusOr<std::string> {
    return Status::NotFound("nvidia-smi not installed");
  };
  auto missing = DetectGpus(Cat(), none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().ExitCode(), 2);
  EXPECT_NE(missing.status().message().find("--gpu ID --gpus N"), std::string::npos);
}

TEST(LaunchTest, Commands) {
  const Cluster four = *ResolveCluster({"h100-sxm5-80gb", 4}, Cat());
  const Workload pixart{"pixart-alpha", 1024, 1024, 1, 20, 1, OutputType::kDecoded};
  auto launch = MakeLaunch(**Cat().Model("pixart-alpha"), "xdit", pixart, four, *ParseParallelConfig("ulysses=2,cfg=2"));
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  auto cmd = WithParallelFlags({"torchrun", "--nproc_per_node", "4", "pixart.py"}, *launch);
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(ShellJoin(*cmd), "torchrun --nproc_per_node 4 pixart.py --ulysses_degree 2 --use_cfg_parallel");
  EXPECT_EQ(launch->command,
            "torchrun --nproc_per_node=4 examples/pixartalpha_example.py --model PixArt-alpha/PixArt-XL-2-1024-MS "
            "--height 1024 --width 1024 --num_inference_steps 20 --ulysses_degree 2 --use_cfg_parallel");
  EXPECT_FALSE(MakeLaunch(**Cat().Model("pixart-alpha"), "xdit", pixart, four, *ParseParallelConfig("distrifusion=4")).ok());
  EXPECT_FALSE(WithParallelFlags({}, *launch).ok());
  EXPECT_EQ(ShellJoin({"a b", "it's", "plain"}), "'a b' 'it'\\''s' plain");
  const Cluster cluster = *ResolveCluster({"cpu", 2}, Cat());
  auto run = DituneRunCommand("ditune", {"tiny-pixart", 64, 64, 1, 4, 1, OutputType::kLatent},
                              *ParseParallelConfig("cfg=2"), cluster);
  EXPECT_EQ(ShellJoin(run), "mpirun -np 2 ditune run --config cfg=2 --model tiny-pixart --height 64 --width 64 "
                            "--steps 4 --batch 1 --output-type latent");
}

}  // namespace
}  // namespace ditune
