// The DiT engine across ranks, under mpirun with 2, 4 and 8 ranks: every rank runs the ref
// kernels (host memory, every access checked; DITUNE_ENGINE_KERNELS=cpu runs the fp32 cpu
// kernels, =cuda the GPU's) and the engine exchanges over MPI for real —
// Ulysses all-to-alls, Ring shifts with the log-sum-exp merge, tensor-parallel all-reduces,
// CFG branches, data-parallel prompts, PipeFusion's stage hand-offs, DistriFusion's K/V
// all-gathers. Each rank's gathered output must equal the engine's own one-device run of the
// same model (bf16 tolerance), with the architecture's query-key norm and rotary embedding on,
// so that the rows' positions must be right too; DistriFusion's stale steps, which have no
// one-device model, must equal one device computing every rank's share in turn.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/device_comm.h"
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

// The kernels work in host memory (ref, cpu).
bool OnHost() { return KernelBackend() != "cuda"; }

// How far a plan's output may be from the one-device run's: the ref kernels, running the
// one-device run's very kernels on its very rows, to the bit; fp32 (cpu) to its rounding
// over a few steps (the GEMMs' blocking differs with the rows a rank holds); bf16 (cuda, and
// sums over tensor-parallel ranks) to its rounding.
double Tolerance(bool bit_exact) {
  if (KernelBackend() == "cpu") return 1e-3;
  return bit_exact && KernelBackend() == "ref" ? 0.0 : 2e-2;
}

Device* TestDevice() {
  static Device* device = [] {
    auto d = CreateDevice(KernelBackend() == "ref" ? "cpu" : KernelBackend());
    if (!d.ok()) {
      ADD_FAILURE() << d.status().ToString();
      std::abort();
    }
    return d->release();
  }();
  return device;
}

// `bytes`, when given, receives EngineBytes of the run (which then has a device of its own
// on the host, so that the device's high-water mark is this run's). `plain` leaves out the
// architecture's query-key norm, rotary embedding and gated MLPs.
StatusOr<EngineResult> RunEngine(const ModelSpec& m, const Workload& w, const ParallelConfig& config, Comm* world,
                                 bool plain, bool in_turn = false, int64_t* bytes = nullptr) {
  std::unique_ptr<Device> own;
  Device* device = TestDevice();
  if (bytes != nullptr && OnHost()) {
    DITUNE_ASSIGN_OR_RETURN(own, CreateDevice("cpu"));
    device = own.get();
  }
  DITUNE_ASSIGN_OR_RETURN(auto kernels, CreateKernels(KernelBackend(), device));
  DITUNE_ASSIGN_OR_RETURN(EngineWork work, EngineWorkFor(m, w, config, world != nullptr ? world->rank() : 0));
  EngineOptions opt;
  opt.architecture_extras = !plain;
  opt.distrifusion_in_turn = in_turn;
  if (bytes != nullptr) *bytes = EngineBytes(m, w, work, opt, kernels->element_bytes());
  DITUNE_ASSIGN_OR_RETURN(auto engine, DitEngine::Create(m, w, work, kernels.get(), opt, world));
  return engine->Generate();
}

struct Case {
  const char* model;
  const char* config;
  int batch;
  int text_tokens = 0;          // overrides the model's (0: keep): a length sp does not divide
  bool plain = false;           // the plain blocks (EngineOptions::architecture_extras off)
  const char* reference = "";   // the one-device configuration to compare with (PipeFusion: its patches)
  int steps = 2;
  // The ranks run the one-device run's very kernels on the very rows (PipeFusion: the same
  // patches in the same order), so the ref kernels must agree to the bit.
  bool bit_exact = false;
  // The reference computes DistriFusion's shares in turn on one device (EngineOptions).
  bool in_turn = false;
  int size = 64;  // height and width
};

void Check(const Case& c) {
  const ParallelConfig config = *ParseParallelConfig(c.config);
  if (config.world_size() != World()->size()) GTEST_SKIP() << "needs " << config.world_size() << " ranks";
  ModelSpec m = **Cat().Model(c.model);
  if (c.text_tokens > 0) m.text_tokens = c.text_tokens;
  const Workload w{c.model, c.size, c.size, 1, c.steps, c.batch, OutputType::kLatent};
  int64_t estimate = 0;
  auto par = RunEngine(m, w, config, World(), c.plain, false, &estimate);
  // A rank that fails mid-run would leave its peers waiting: end the job instead.
  if (!par.ok()) {
    World()->Abort(std::string(c.config) + ": " + par.status().ToString());
    std::exit(1);  // the job is ending: never read a failed result
  }
  // The memory estimate `run` refuses by covers this rank's real exchanges and buffers.
  if (OnHost()) {
    EXPECT_GE(estimate, par->peak_bytes) << c.config << " rank " << World()->rank();
  }
  auto one = RunEngine(m, w, *ParseParallelConfig(c.reference), nullptr, c.plain, c.in_turn);
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
    EXPECT_LE(err, Tolerance(c.bit_exact)) << c.model << " " << c.config << " rank " << World()->rank()
                                               << " prompt " << p;
  }
  if (config.sp() > 1 || config.tp > 1 || config.cfg > 1 || config.distrifusion > 1 || config.pipefusion > 1) {
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
TEST(Engine2, TensorParallelPlainBlocks) { Check({"tiny-pixart", "tp=2", 1, 0, true}); }
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

// Hand-offs too large to be sent eagerly: a stage's send must not wait for a receiver that
// is itself waiting for the latent rows this stage has yet to receive (a deadlock once).
TEST(Engine2, PipeFusionLargeMessages) {
  Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=1", 1, 0, false, "patches=2,warmup=1", 3, true, false, 512});
}

// PipeFusion of joint and single blocks: the first patch of a step carries the whole text.
TEST(Engine2, PipeFusionJointWarm) { Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=3", 1, 0, false, "", 3, true}); }
TEST(Engine2, PipeFusionJointStale) {
  Check({"tiny-sd3", "pipefusion=2,patches=4,warmup=1", 2, 0, false, "patches=4,warmup=1", 3, true});
}
TEST(Engine2, PipeFusionJointSingleStale) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=0", 1, 0, false, "patches=2,warmup=0", 3, true});
}
TEST(Engine4, PipeFusionJointCfg) {
  Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=1,cfg=2", 1, 0, false, "patches=2,warmup=1", 3});
}
TEST(Engine4, PipeFusionJointSingleDp) {
  Check({"tiny-flux", "pipefusion=2,patches=4,warmup=1,dp=2", 2, 0, false, "patches=4,warmup=1", 3, true});
}

// DistriFusion with every step synchronous is the model (the ranks run its very kernels on
// its very rows).
TEST(Engine2, DistriFusionWarmCross) { Check({"tiny-pixart", "distrifusion=2,warmup=3", 2, 0, false, "", 3, true}); }
TEST(Engine2, DistriFusionWarmJoint) { Check({"tiny-sd3", "distrifusion=2,warmup=3", 1, 0, false, "", 3, true}); }
TEST(Engine4, DistriFusionWarmSingle) { Check({"tiny-flux", "distrifusion=4,warmup=3", 1, 0, false, "", 3, true}); }
TEST(Engine4, DistriFusionWarmReplicatedText) { Check({"tiny-sd3", "distrifusion=4,warmup=3", 1, 6, false, "", 3, true}); }

// DistriFusion's stale steps: the ranks compute what one device computes taking their shares
// in turn, to the bit.
TEST(Engine2, DistriFusionStaleCrossInTurn) {
  Check({"tiny-pixart", "distrifusion=2,warmup=1", 2, 0, false, "distrifusion=2,warmup=1", 4, true, true});
}
TEST(Engine2, DistriFusionStaleJointInTurn) {
  Check({"tiny-sd3", "distrifusion=2,warmup=1", 1, 0, false, "distrifusion=2,warmup=1", 4, true, true});
}
TEST(Engine4, DistriFusionStaleSingleInTurn) {
  Check({"tiny-flux", "distrifusion=4,warmup=2", 1, 0, false, "distrifusion=4,warmup=2", 4, true, true});
}
TEST(Engine4, DistriFusionStaleReplicatedTextInTurn) {
  Check({"tiny-sd3", "distrifusion=4,warmup=1", 2, 7, false, "distrifusion=4,warmup=1", 3, true, true});
}

// The nonblocking in-place all-gather DistriFusion's buffers rely on moves every chunk exactly
// (small integers: exact in bf16).
void CheckInPlaceGather() {
  auto kernels = CreateKernels(KernelBackend(), TestDevice());
  ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
  DeviceComm dc(World(), kernels->get());
  const int n = World()->size(), me = World()->rank();
  const int64_t count = 6;
  std::vector<float> host(static_cast<size_t>(n * count), -1.0f);
  for (int64_t j = 0; j < count; ++j) host[static_cast<size_t>(me * count + j)] = static_cast<float>(me * 16 + j);
  auto buf = TestDevice()->Alloc(n * count * (*kernels)->element_bytes());
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE((*kernels)->Upload(host.data(), (*buf)->data(), n * count).ok());
  auto r = dc.IAllGatherInPlace((*buf)->data(), count);
  if (!r.ok()) {
    World()->Abort(r.status().ToString());
    std::exit(1);
  }
  ASSERT_TRUE((*r)->Wait().ok());
  ASSERT_TRUE((*kernels)->Download((*buf)->data(), host.data(), n * count).ok());
  for (int q = 0; q < n; ++q) {
    for (int64_t j = 0; j < count; ++j) EXPECT_EQ(host[static_cast<size_t>(q * count + j)], q * 16 + j) << q << " " << j;
  }
}
TEST(Engine2, InPlaceAllGather) { CheckInPlaceGather(); }
TEST(Engine4, InPlaceAllGather) { CheckInPlaceGather(); }

// PipeFusion with sequence and tensor parallelism inside the stages: each patch's rows split
// over the sequence-parallel ranks, every rank's K/V buffers for its heads. The ranks place
// every key at its one-device row, so Ulysses and Ring agree with the one-device run of the
// same patches to the bit; tensor parallelism sums partial products (bf16 tolerance).
TEST(Engine2, PatchesUlyssesJoint) {
  Check({"tiny-sd3", "patches=2,warmup=1,ulysses=2", 2, 0, false, "patches=2,warmup=1", 3, true});
}
TEST(Engine2, PatchesRingJointSingle) {
  Check({"tiny-flux", "patches=2,warmup=0,ring=2", 1, 0, false, "patches=2,warmup=0", 3, true});
}
TEST(Engine2, PatchesTensorParallelCross) {
  Check({"tiny-pixart", "patches=4,warmup=1,tp=2", 1, 0, false, "patches=4,warmup=1", 3});
}
TEST(Engine4, PipeFusionUlyssesWarm) {
  Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=3,ulysses=2", 1, 0, false, "", 3, true});
}
TEST(Engine4, PipeFusionUlyssesCross) {
  Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=1,ulysses=2", 2, 0, false, "patches=2,warmup=1", 3, true});
}
TEST(Engine4, PipeFusionUlyssesReplicatedText) {
  Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=1,ulysses=2", 1, 7, false, "patches=2,warmup=1", 3, true});
}
TEST(Engine4, PipeFusionRingJointSingle) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=1,ring=2", 2, 0, false, "patches=2,warmup=1", 3, true});
}
TEST(Engine4, PipeFusionRingReplicatedText) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=0,ring=2", 1, 7, false, "patches=2,warmup=0", 3, true});
}
TEST(Engine4, PatchesUsp) {
  Check({"tiny-sd3", "patches=2,warmup=1,ulysses=2,ring=2", 1, 0, false, "patches=2,warmup=1", 3, true});
}
TEST(Engine4, PipeFusionTensorParallel) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=1,tp=2", 1, 0, false, "patches=2,warmup=1", 3});
}
TEST(Engine4, PipeFusionUlyssesVideo) {
  Check({"tiny-video", "pipefusion=2,patches=2,warmup=1,ulysses=2", 1, 0, false, "patches=2,warmup=1", 3, true});
}
TEST(Engine4, PatchesRingCfg) {
  Check({"tiny-pixart", "patches=2,warmup=1,ring=2,cfg=2", 1, 0, false, "patches=2,warmup=1", 3});
}
// 8 ranks: every kind of parallelism inside and beside the stages at once.
TEST(Engine8, PipeFusionUlyssesCfg) {
  Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=1,ulysses=2,cfg=2", 1, 0, false, "patches=2,warmup=1", 3});
}
TEST(Engine8, PipeFusionRingTensorParallel) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=1,ring=2,tp=2", 1, 0, false, "patches=2,warmup=1", 3});
}
TEST(Engine8, PipeFusionUlyssesDp) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=1,ulysses=2,dp=2", 2, 0, false, "patches=2,warmup=1", 3, true});
}

}  // namespace
}  // namespace ditune::exec
