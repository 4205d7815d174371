#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodels/memory_model.h"
#include "store/store.h"
#include "planner/auto_configure.h"
#include "planner/enumerate.h"
#include "planner/gpu_launch.h"
#include "planner/plan.h"
#include "planner/predict.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

ValidationContext Ctx(const char* model, int h, int w, int gpus, int batch = 1) {
  const ModelSpec* m = *Cat().Model(model);
  Workload wl{model, h, w, 1, 20, batch, OutputType::kDecoded};
  return {m, *ComputeTokenGeometry(*m, wl), 20, batch, gpus};
}

TEST(EnumerateTest, FactorisationCountMatchesBruteForce) {
  for (int n : {1, 2, 3, 4, 6, 8, 12}) {
    long brute = 0;
    for (int a = 1; a <= n; ++a)
      for (int b = 1; b <= n; ++b)
        for (int c = 1; c <= n; ++c)
          for (int d = 1; d <= n; ++d)
            for (int e = 1; e <= n; ++e)
              for (int f = 1; f <= n; ++f) brute += a * b * c * d * e * f == n;
    EXPECT_EQ(CountFactorisations(n), brute) << n;
  }
}

TEST(EnumerateTest, EveryValidConfigAndNothingElse) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  for (int n : {1, 2, 3, 4, 6, 8}) {
    auto ctx = Ctx("pixart-alpha", 1536, 1536, n, 2);  // 96 patch rows: divisible by 1, 2, 3, 4, 6, 8
    EnumerateOptions opt;
    opt.vary_patches = false;
    opt.vary_order = false;
    opt.distrifusion = false;
    auto configs = EnumerateConfigs(ctx, cluster, opt);
    // Brute force over every tuple of degrees with product n.
    std::set<std::string> expected;
    for (int dp = 1; dp <= n; ++dp)
      for (int cfg = 1; cfg <= n; ++cfg)
        for (int pp = 1; pp <= n; ++pp)
          for (int u = 1; u <= n; ++u)
            for (int r = 1; r <= n; ++r)
              for (int tp = 1; tp <= n; ++tp) {
                if (dp * cfg * pp * u * r * tp != n) continue;
                ParallelConfig c;
                c.dp = dp, c.cfg = cfg, c.pipefusion = pp, c.patches = pp, c.ulysses = u, c.ring = r, c.tp = tp;
                if (IsValidConfig(ctx, c)) expected.insert(ToString(c));
              }
    std::set<std::string> got;
    for (const auto& c : configs) {
      EXPECT_TRUE(IsValidConfig(ctx, c)) << ToString(c);
      EXPECT_TRUE(got.insert(ToString(c)).second) << "duplicate " << ToString(c);
    }
    EXPECT_EQ(got, expected) << n;
    EXPECT_FALSE(expected.empty());
  }
}

TEST(EnumerateTest, NonPowersOfTwoAndVariants) {
  const Cluster l40 = *ResolveCluster({"l40-48gb", 6}, Cat());
  const ModelSpec* m = *Cat().Model("cogvideox-5b");
  Workload wl{"cogvideox-5b", 480, 720, 49, 50, 1, OutputType::kLatent};
  ValidationContext ctx{m, *ComputeTokenGeometry(*m, wl), 50, 1, 6};
  std::set<std::string> got;
  for (const auto& c : EnumerateConfigs(ctx, l40)) {
    EXPECT_TRUE(IsValidConfig(ctx, c));
    got.insert(ToString(c));
  }
  for (const char* c : {"ulysses=3,ring=2", "ulysses=2,ring=3", "ulysses=3,cfg=2", "ring=3,cfg=2", "ulysses=6"}) {
    EXPECT_TRUE(got.count(c)) << c;
  }
  // A PCIe box: rank orders that keep the all-to-alls inside a socket are tried too.
  bool reordered = false;
  for (const auto& s : got) reordered |= s.find("order=") != std::string::npos;
  EXPECT_TRUE(reordered);
  // PipeFusion patch counts beyond the stage count, and DistriFusion.
  auto px = Ctx("pixart-alpha", 1024, 1024, 4);
  const Cluster h100 = *ResolveCluster({"h100-sxm5-80gb", 4}, Cat());
  std::set<std::string> p;
  for (const auto& c : EnumerateConfigs(px, h100)) p.insert(ToString(c));
  EXPECT_TRUE(p.count("pipefusion=4"));
  EXPECT_TRUE(p.count("pipefusion=4,patches=8"));
  EXPECT_TRUE(p.count("pipefusion=2,patches=1,cfg=2"));
  EXPECT_TRUE(p.count("distrifusion=4"));
}

TEST(PlanTest, MemoryPruningRemovesExactlyWhatDoesNotFit) {
  // Wan 14B at 720p on 24 GB cards: only splits of the weights (tp, PipeFusion) can fit,
  // which ditune's executor runs (xDiT runs neither for Wan).
  const Cluster cluster = *ResolveCluster({"rtx4090-24gb", 8}, Cat());
  Workload w{"wan2.1-14b", 720, 1280, 81, 50, 1, OutputType::kDecoded};
  PlanOptions opt;
  opt.executor = PlanFor::kDitune;
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
  EXPECT_NE(plan.status().message().find("the smallest needs"), std::string::npos);
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

// A plan for ditune's engine is priced as the engine runs (no Python glue, one kernel per
// op, its own scale), so the same workload is predicted faster and may rank differently;
// the executor is part of the plan and of its cache key. On CPU ranks ditune's executor is
// the CPU one, priced as before.
TEST(PlanTest, PlansForDitunesEngineArePricedAsTheEngine) {
  const Cluster h100 = *ResolveCluster({"h100-sxm5-80gb", 4}, Cat());
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  PlanOptions xdit, ditune;
  ditune.executor = PlanFor::kDitune;
  auto a = MakePlan(Cat(), w, h100, {}, xdit);
  auto b = MakePlan(Cat(), w, h100, {}, ditune);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->executor, PlanFor::kDitune);
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
  EXPECT_EQ(ParsePlanFor("torch").status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(ParsePlanFor("torch").status().message().find("xdit, ditune"), std::string::npos);
}

TEST(PlanTest, XditFlagsOfTheWinnerParseBack) {
  const Cluster cluster = *ResolveCluster({"a100-sxm4-80gb", 8}, Cat());
  Workload w{"pixart-alpha", 2048, 2048, 1, 20, 1, OutputType::kDecoded};
  auto plan = MakePlan(Cat(), w, cluster, {});
  ASSERT_TRUE(plan.ok());
  for (const auto& c : plan->ranked) {
    ASSERT_TRUE(c.xdit.has_value());
    EXPECT_TRUE(SupportedByXdit(c.config).ok());
    EXPECT_EQ(*ParseParallelConfig(ToXditFlags(c.config)), c.config) << ToXditFlags(c.config);
    // PixArt's example script takes xDiT's standard flags: the plan's flags parse back too.
    EXPECT_EQ(*ParseParallelConfig(c.xdit->parallel_flags), c.config) << c.xdit->parallel_flags;
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

// Collectives timed between host-memory ranks never become a GPU link's curves, even where a
// store holds them under that link; over shared memory they fit as before.
TEST(RecalibrateTest, HostTimingsNeverPriceAGpuLink) {
  auto store = std::move(Store::Open(":memory:")).value();
  std::vector<Measurement> ms;
  for (const char* link : {"nvlink4", "shm"}) {
    for (double bytes : {1e4, 1e5, 1e6, 1e7, 1e8}) {
      Measurement m;
      m.source = MeasurementSource::kMicrobench;
      m.kind = MeasurementKind::kCollective;
      m.op = "all_to_all";
      m.backend = "mpi";
      m.device = "cpu";
      m.ranks = 2;
      m.link = link;
      m.bytes = Bytes(bytes);
      m.median = m.p10 = m.p90 = Seconds(2e-6 + bytes / 8e9);
      m.samples = 5;
      ms.push_back(m);
    }
  }
  ASSERT_TRUE(store->AddMeasurements(ms).ok());
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store.get(), Cat(), &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  bool shm = false;
  for (const auto& f : *fits) {
    EXPECT_EQ(f.key.find("nvlink4"), std::string::npos) << f.key;
    shm |= f.kind == "comm" && f.key.starts_with("all_to_all/shm");
  }
  EXPECT_TRUE(shm);
  int named = 0;
  for (const auto& s : skipped) named += s.find("host-memory ranks measure shared memory, not nvlink4") != std::string::npos;
  EXPECT_EQ(named, 5);
}

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
  auto launch = MakeXditLaunch(**Cat().Model("pixart-alpha"), pixart, four, *ParseParallelConfig("ulysses=2,cfg=2"));
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  auto cmd = XditCommand({"torchrun", "--nproc_per_node", "4", "pixart.py"}, *launch);
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(ShellJoin(*cmd), "torchrun --nproc_per_node 4 pixart.py --ulysses_degree 2 --use_cfg_parallel");
  EXPECT_EQ(launch->command,
            "torchrun --nproc_per_node=4 examples/pixartalpha_example.py --model PixArt-alpha/PixArt-XL-2-1024-MS "
            "--height 1024 --width 1024 --num_inference_steps 20 --ulysses_degree 2 --use_cfg_parallel");
  EXPECT_FALSE(MakeXditLaunch(**Cat().Model("pixart-alpha"), pixart, four, *ParseParallelConfig("distrifusion=4")).ok());
  EXPECT_FALSE(XditCommand({}, *launch).ok());
  EXPECT_EQ(ShellJoin({"a b", "it's", "plain"}), "'a b' 'it'\\''s' plain");
  const Cluster cluster = *ResolveCluster({"cpu", 2}, Cat());
  auto run = DituneRunCommand("ditune", {"tiny-pixart", 64, 64, 1, 4, 1, OutputType::kLatent},
                              *ParseParallelConfig("cfg=2"), cluster);
  EXPECT_EQ(ShellJoin(run), "mpirun -np 2 ditune run --config cfg=2 --model tiny-pixart --height 64 --width 64 "
                            "--steps 4 --batch 1 --output-type latent");
}

// Runs of the engine on some models calibrate its scale for every model on that device and
// backend; the eager framework's scales and the engine's never mix.
TEST(PredictTest, EngineRunsOnSomeModelsCalibrateTheOthers) {
  const Cluster host = *ResolveCluster({"cpu", 1}, Cat());
  std::vector<Fit> fits;
  for (auto [op, rate] : std::vector<std::pair<const char*, double>>{{"gemm", 3e10}, {"attention", 1e10},
                                                                     {"elementwise", 4e9}}) {
    Fit f;
    f.kind = kFitKindCompute;
    f.key = std::string("cpu/ref/") + op;
    f.params = PiecewiseLatencyModel({{1, 1e15, 2e-6, rate}}).ToJson();
    f.active = true;
    fits.push_back(f);
  }
  auto dit = [&](const std::string& model, int size, const std::vector<Fit>& with) {
    Workload w{model, size, size, 1, 3, 1, OutputType::kLatent};
    auto r = SimulateEngineRun(**Cat().Model(model), w, ParallelConfig{}, host, with, "ref");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->dit.value() : 0.0;
  };
  // Recorded runs of three models, 30% slower than the per-op curves say; one run on the cpu
  // kernels, which calibrates their own scale; one two-rank run, which calibrates two-rank
  // plans.
  std::vector<Measurement> runs;
  auto run = [&](const std::string& model, int size, double seconds, const std::string& backend, int ranks,
                 const std::string& config = "") {
    Measurement m;
    m.id = static_cast<int64_t>(runs.size() + 1);
    m.source = MeasurementSource::kExecutor;
    m.kind = MeasurementKind::kE2e;
    m.op = "dit";
    m.backend = backend;
    m.device = "cpu";
    m.ranks = ranks;
    m.params = {{"model", model}, {"height", size}, {"width", size}, {"frames", 1}, {"steps", 3},
                {"batch", 1}, {"config", config}};
    m.median = m.p10 = m.p90 = Seconds(seconds);
    runs.push_back(m);
  };
  run("tiny-pixart", 256, 1.3 * dit("tiny-pixart", 256, fits), "ref", 1);
  run("tiny-flux", 128, 1.3 * dit("tiny-flux", 128, fits), "ref", 1);
  run("tiny-sd3", 128, 1.3 * dit("tiny-sd3", 128, fits), "ref", 1);
  Workload w_cpu{"tiny-sd3", 256, 256, 1, 3, 1, OutputType::kLatent};
  const double cpu_dit = SimulateEngineRun(**Cat().Model("tiny-sd3"), w_cpu, ParallelConfig{}, host, fits, "cpu")->dit.value();
  run("tiny-sd3", 256, 1.5 * cpu_dit, "cpu", 1);
  const Cluster pair = *ResolveCluster({"cpu", 2}, Cat());
  const Workload w2{"tiny-sd3", 256, 256, 1, 3, 1, OutputType::kLatent};
  const double two_rank = SimulateEngineRun(**Cat().Model("tiny-sd3"), w2, *ParseParallelConfig("ulysses=2"), pair,
                                            fits, "ref")
                              ->dit.value();
  run("tiny-sd3", 256, 2.0 * two_rank, "ref", 2, "ulysses=2");
  std::vector<std::string> skipped;
  auto all_scales = *FitEngineScales(runs, Cat(), fits, &skipped);
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  ASSERT_EQ(all_scales.size(), 3u);
  // The cpu kernels' own scale, from their one run (priced by the catalog's CPU figures).
  EXPECT_EQ(all_scales[0].key, "cpu/cpu/engine");
  EXPECT_NEAR(all_scales[0].params["compute_scale"].get<double>(), 1.5, 1e-9);
  EXPECT_EQ(all_scales[0].measurement_ids, (std::vector<int64_t>{4}));
  const std::vector<Fit> scales(all_scales.begin() + 1, all_scales.end());
  EXPECT_EQ(scales[0].key, EngineFitKey("cpu", "ref"));
  EXPECT_EQ(scales[0].key, "cpu/ref/engine");
  EXPECT_NEAR(scales[0].params["compute_scale"].get<double>(), 1.3, 1e-9);
  EXPECT_EQ(scales[0].points, 3);
  EXPECT_EQ(scales[0].measurement_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(scales[1].key, EngineFitKey("cpu", "ref", 2));
  EXPECT_EQ(scales[1].key, "cpu/ref/engine@2");
  EXPECT_NEAR(scales[1].params["compute_scale"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(scales[1].measurement_ids, (std::vector<int64_t>{5}));
  {
    // Two-rank plans take the two-rank scale; one device and sizes without one of their own
    // take the one-device scale.
    const std::vector<Fit> both = {scales[0], scales[1]};
    EXPECT_EQ((*ModelsFor(pair, "tiny-sd3", both, "ref", Runtime::kEngine)).compute.scale(), 2.0);
    EXPECT_EQ((*ModelsFor(host, "tiny-sd3", both, "ref", Runtime::kEngine)).compute.scale(), 1.3);
    const Cluster four = *ResolveCluster({"cpu", 4}, Cat());
    EXPECT_EQ((*ModelsFor(four, "tiny-sd3", both, "ref", Runtime::kEngine)).compute.scale(), 1.3);
  }
  // A model with no runs of its own is predicted with the scale (the host has no launch
  // overhead, so every time scales).
  std::vector<Fit> with = fits;
  with.push_back(scales[0]);
  EXPECT_NEAR(dit("tiny-video", 256, with), 1.3 * dit("tiny-video", 256, fits), 1e-9);
  // The eager framework's models ignore the engine's scale, and the engine ignores a per-model
  // framework scale.
  auto eager = std::move(ModelsFor(host, "tiny-video", with, "ref", Runtime::kEager)).value();
  EXPECT_EQ(eager.compute.scale(), 1.0);
  Fit framework;
  framework.kind = kFitKindE2e;
  framework.key = E2eFitKey("cpu", "tiny-video");
  framework.params = {{"compute_scale", 2.0}};
  framework.active = true;
  with.push_back(framework);
  EXPECT_EQ((*ModelsFor(host, "tiny-video", with, "ref", Runtime::kEngine)).compute.scale(), 1.3);
  EXPECT_EQ((*ModelsFor(host, "tiny-video", with, "ref", Runtime::kEager)).compute.scale(), 2.0);
  // Two-rank cuda runs calibrate two-GPU plans over NCCL only (over MPI ranks may share a GPU).
  {
    auto mpi = runs.back();
    mpi.backend = "cuda";
    mpi.device = "h100-sxm5-80gb";
    mpi.params["comm"] = "mpi";
    auto nccl = mpi;
    nccl.params["comm"] = "nccl";
    std::vector<std::string> why;
    auto gpu = *FitEngineScales({mpi, nccl}, Cat(), {}, &why);
    ASSERT_EQ(gpu.size(), 1u);
    EXPECT_EQ(gpu[0].key, "h100-sxm5-80gb/cuda/engine@2");
    EXPECT_EQ(gpu[0].points, 1);
    ASSERT_EQ(why.size(), 1u);
    EXPECT_NE(why[0].find("over MPI"), std::string::npos) << why[0];
  }
  // A run naming a model the catalog lacks is skipped with the reason, not fatal.
  run("no-such-model", 256, 1.0, "ref", 1);
  skipped.clear();
  EXPECT_EQ((*FitEngineScales(runs, Cat(), fits, &skipped)).size(), 3u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("no-such-model"), std::string::npos) << skipped[0];
}

}  // namespace
}  // namespace ditune
