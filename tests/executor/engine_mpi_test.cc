// The DiT engine across ranks, under mpirun with 2 and 4 ranks: every rank runs the ref
// kernels (host memory, every access checked; DITUNE_ENGINE_KERNELS=cuda runs the GPU's) and
// the engine exchanges over MPI for real —
// Ulysses all-to-alls, Ring shifts with the log-sum-exp merge, tensor-parallel all-reduces,
// CFG branches, data-parallel prompts, PipeFusion's stage hand-offs. Each rank's gathered output must equal the engine's
// own one-device run of the same model (bf16 tolerance), with the architecture's query-key
// norm and rotary embedding on, so that the rows' positions must be right too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/engine.h"
#include "executor/kernels.h"
#include "tests/executor/mpi_test_util.h"

namespace ditune::exec {
namespace {

// What the loop added to prompt p's noise (the latent itself is dominated by the noise).
Mat Delta(const Mat& latent, const ModelSpec& m, const Workload& w, int p) {
  auto tokens = ComputeTokenGeometry(m, w);
  const int64_t lat = static_cast<int64_t>(m.latent_channels) * m.patch_spatial * m.patch_spatial * m.patch_temporal;
  return latent - RandomMat(tokens->image_tokens(), lat, 1.0f, 42, 1000 + static_cast<uint64_t>(p));
}

// The kernels: ref, or DITUNE_ENGINE_KERNELS (cuda on a GPU machine, where the ranks share
// the GPU and MPI stages the transfers through the host).
std::string KernelBackend() {
  const char* e = std::getenv("DITUNE_ENGINE_KERNELS");
  return e != nullptr ? e : "ref";
}

StatusOr<EngineResult> RunEngine(const ModelSpec& m, const Workload& w, const ParallelConfig& config, Comm* world,
                           bool from_cpu_model) {
  static Device* device = [] {
    auto d = CreateDevice(KernelBackend() == "ref" ? "cpu" : KernelBackend());
    if (!d.ok()) {
      ADD_FAILURE() << d.status().ToString();
      std::abort();
    }
    return d->release();
  }();
  DITUNE_ASSIGN_OR_RETURN(auto kernels, CreateKernels(KernelBackend(), device));
  DITUNE_ASSIGN_OR_RETURN(EngineWork work, EngineWorkFor(m, w, config, world != nullptr ? world->rank() : 0));
  EngineOptions opt;
  opt.weights_from_cpu_model = from_cpu_model;
  opt.architecture_extras = !from_cpu_model;
  DITUNE_ASSIGN_OR_RETURN(auto engine, DitEngine::Create(m, w, work, kernels.get(), opt, world));
  return engine->Generate();
}

struct Case {
  const char* model;
  const char* config;
  int batch;
  int text_tokens = 0;          // overrides the model's (0: keep): a length sp does not divide
  bool from_cpu_model = false;  // the CPU executor's weights (sliced per tensor-parallel rank)
  const char* reference = "";   // the one-device configuration to compare with (PipeFusion: its patches)
  int steps = 2;
  // The ranks run the one-device run's very kernels on the very rows (PipeFusion: the same
  // patches in the same order), so the ref kernels must agree to the bit.
  bool bit_exact = false;
};

void Check(const Case& c) {
  const ParallelConfig config = *ParseParallelConfig(c.config);
  if (config.world_size() != World()->size()) GTEST_SKIP() << "needs " << config.world_size() << " ranks";
  ModelSpec m = **Cat().Model(c.model);
  if (c.text_tokens > 0) m.text_tokens = c.text_tokens;
  const Workload w{c.model, 64, 64, 1, c.steps, c.batch, OutputType::kLatent};
  auto par = RunEngine(m, w, config, World(), c.from_cpu_model);
  // A rank that fails mid-run would leave its peers waiting: end the job instead.
  if (!par.ok()) World()->Abort(std::string(c.config) + ": " + par.status().ToString());
  auto one = RunEngine(m, w, *ParseParallelConfig(c.reference), nullptr, c.from_cpu_model);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(par->latents.size(), static_cast<size_t>(c.batch));
  ASSERT_EQ(one->latents.size(), static_cast<size_t>(c.batch));
  for (int p = 0; p < c.batch; ++p) {
    const Mat dp = Delta(par->latents[p], m, w, p), d1 = Delta(one->latents[p], m, w, p);
    EXPECT_GT(d1.norm(), 0.0f);
    const double err = MaxRelativeError(dp, d1);
    if (World()->rank() == 0 && std::getenv("DITUNE_TEST_VERBOSE") != nullptr) {
      std::printf("%s %s prompt %d: max-norm relative error %.4g\n", c.model, c.config, p, err);
    }
    EXPECT_LE(err, c.bit_exact && KernelBackend() == "ref" ? 0.0 : 2e-2) << c.model << " " << c.config << " rank " << World()->rank()
                                               << " prompt " << p;
  }
  if (config.sp() > 1 || config.tp > 1 || config.cfg > 1) {
    EXPECT_GT(par->comm_seconds, 0.0);  // the exchanges happened (data parallelism has none)
  }
}

// 2 ranks.
TEST(Engine2, UlyssesCross) { Check({"tiny-pixart", "ulysses=2", 1}); }
TEST(Engine2, UlyssesJoint) { Check({"tiny-sd3", "ulysses=2", 2}); }
TEST(Engine2, UlyssesSingle) { Check({"tiny-flux", "ulysses=2", 1}); }
TEST(Engine2, RingCross) { Check({"tiny-pixart", "ring=2", 2}); }
TEST(Engine2, RingJointSingle) { Check({"tiny-flux", "ring=2", 1}); }
TEST(Engine2, RingReplicatedText) { Check({"tiny-sd3", "ring=2", 1, 7}); }
TEST(Engine2, TensorParallelDrawnWeights) { Check({"tiny-sd3", "tp=2", 1}); }
TEST(Engine2, TensorParallelSingle) { Check({"tiny-flux", "tp=2", 1}); }
TEST(Engine2, TensorParallelCpuWeights) { Check({"tiny-pixart", "tp=2", 1, 0, true}); }
TEST(Engine2, Cfg) { Check({"tiny-pixart", "cfg=2", 2}); }
TEST(Engine2, DataParallel) { Check({"tiny-sd3", "dp=2", 2}); }

// 4 ranks.
TEST(Engine4, UspJointSingle) { Check({"tiny-flux", "ulysses=2,ring=2", 1}); }
TEST(Engine4, UspJointBatch) { Check({"tiny-sd3", "ulysses=2,ring=2", 2}); }
TEST(Engine4, Ulysses4) { Check({"tiny-pixart", "ulysses=4", 1}); }
TEST(Engine4, Ulysses4ReplicatedText) { Check({"tiny-sd3", "ulysses=4", 2, 6}); }
TEST(Engine4, Ring4) { Check({"tiny-sd3", "ring=4", 1}); }
TEST(Engine4, UspReplicatedText) { Check({"tiny-flux", "ulysses=2,ring=2", 1, 6}); }
TEST(Engine4, UlyssesCfg) { Check({"tiny-pixart", "ulysses=2,cfg=2", 1}); }
TEST(Engine4, TpUlysses) { Check({"tiny-sd3", "ulysses=2,tp=2", 1}); }
TEST(Engine4, TpRing) { Check({"tiny-flux", "ring=2,tp=2", 1}); }
TEST(Engine4, RingDp) { Check({"tiny-pixart", "ring=2,dp=2", 2}); }
TEST(Engine4, CfgDp) { Check({"tiny-sd3", "cfg=2,dp=2", 2}); }

// PipeFusion: synchronous warm-up throughout equals the model; with stale K/V it equals the
// one-device run of the same patches and warm-up (the staleness is the method's, not a bug).
TEST(Engine2, PipeFusionWarm) { Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=3", 1, 0, false, "", 3}); }
TEST(Engine2, PipeFusionStale) {
  Check({"tiny-pixart", "pipefusion=2,patches=4,warmup=1", 2, 0, false, "patches=4,warmup=1", 3, true});
}
TEST(Engine2, PipeFusionNoWarmup) {
  Check({"tiny-video", "pipefusion=2,patches=2,warmup=0", 1, 0, false, "patches=2,warmup=0", 3, true});
}
TEST(Engine4, PipeFusionCfg) {
  Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=1,cfg=2", 1, 0, false, "patches=2,warmup=1", 3});
}
TEST(Engine4, PipeFusionDp) {
  Check({"tiny-video", "pipefusion=2,patches=4,warmup=1,dp=2", 2, 0, false, "patches=4,warmup=1", 3, true});
}

// What the engine does not run across ranks it refuses by name.
TEST(Engine2, PipeFusionOfJointBlocksIsRefusedAcrossRanks) {
  if (World()->size() != 2) GTEST_SKIP();
  const ModelSpec& m = **Cat().Model("tiny-sd3");
  const Workload w{"tiny-sd3", 64, 64, 1, 2, 1, OutputType::kLatent};
  auto r = RunEngine(m, w, *ParseParallelConfig("pipefusion=2,patches=2"), World(), false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--emulate-rank"), std::string::npos) << r.status().ToString();
  auto d = RunEngine(m, w, *ParseParallelConfig("distrifusion=2"), World(), false);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("DistriFusion"), std::string::npos) << d.status().ToString();
}

}  // namespace
}  // namespace ditune::exec
