// The DiT engine on the cuda kernels: on tiny models it equals the engine on the host's cpu
// kernels (fp32) within bf16 tolerance, equals the ref kernels at catalog shapes, and runs
// every rank of a plan.
#include <cstdlib>

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/cpu_device.h"
#include "executor/engine.h"
#include "executor/kernels.h"
#include "tests/gpu/cuda_test_util.h"

namespace ditune::exec {
namespace {

// The catalog of the build's tree, or $DITUNE_DATA's where set: a binary built on one machine
// and run on another (tools/device/prebuild.sh) finds the data of the tree it runs in.
const Catalog& Cat() {
  static const Catalog* c = [] {
    const char* env = std::getenv("DITUNE_DATA");
    return new Catalog(*Catalog::Load(env != nullptr && *env != '\0' ? env : DITUNE_TEST_DATA_DIR));
  }();
  return *c;
}

class CudaEngineTest : public CudaKernelsTest {
 protected:
  void SetUp() override {
    CudaKernelsTest::SetUp();
    if (HasFatalFailure()) return;
    auto k = CreateKernels("cuda", dev_.get());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    k_ = std::move(k).value();
  }
  StatusOr<EngineResult> Run(Kernels* kernels, const ModelSpec& m, const Workload& w, const ParallelConfig& c, int rank,
                             const EngineOptions& opt) {
    DITUNE_ASSIGN_OR_RETURN(EngineWork work, EngineWorkFor(m, w, c, rank));
    DITUNE_ASSIGN_OR_RETURN(auto engine, DitEngine::Create(m, w, work, kernels, opt));
    return engine->Generate();
  }
  std::unique_ptr<Kernels> k_;
};

// The same engine on the GPU (bf16) and on the host's cpu kernels (fp32).
TEST_F(CudaEngineTest, OneGpuEqualsTheCpuKernels) {
  for (const auto& [id, batch] : std::vector<std::pair<const char*, int>>{
           {"tiny-pixart", 2}, {"tiny-sd3", 1}, {"tiny-flux", 2}, {"tiny-video", 1}}) {
    const ModelSpec& m = **Cat().Model(id);
    const Workload w{id, 64, 64, m.modality == Modality::kVideo ? 9 : 1, 3, batch, OutputType::kLatent};
    auto host = NewCpuDevice();
    auto cpu_kernels = CreateKernels("cpu", host.get());
    ASSERT_TRUE(cpu_kernels.ok());
    const EngineOptions opt;
    auto cpu = Run(cpu_kernels->get(), m, w, ParallelConfig{}, 0, opt);
    ASSERT_TRUE(cpu.ok()) << id << ": " << cpu.status().ToString();
    auto gpu = Run(k_.get(), m, w, ParallelConfig{}, 0, opt);
    ASSERT_TRUE(gpu.ok()) << id << ": " << gpu.status().ToString();
    ASSERT_EQ(gpu->latents.size(), static_cast<size_t>(batch));
    auto tokens = ComputeTokenGeometry(m, w);
    for (int p = 0; p < batch; ++p) {
      // Compared on what the loop added to the noise, which the final latent would hide.
      const Mat noise = RandomMat(tokens->image_tokens(), gpu->latents[p].cols(), 1.0f, 42, 1000 + static_cast<uint64_t>(p));
      EXPECT_LE(MaxRelativeError(gpu->latents[p] - noise, cpu->latents[p] - noise), 2e-2) << id << " " << p;
    }
    EXPECT_GT(gpu->dit_seconds, 0.0);
  }
}

// What the loop added to prompt 0's initial noise (the final latent is mostly noise).
Mat Delta(const Mat& latent, const ModelSpec& m, const Workload& w) {
  auto tokens = ComputeTokenGeometry(m, w);
  const int64_t lat = static_cast<int64_t>(m.latent_channels) * m.patch_spatial * m.patch_spatial * m.patch_temporal;
  return latent - RandomMat(tokens->image_tokens(), lat, 1.0f, 42, 1000);
}

// Catalog shapes cut to one or two blocks, so that the flash attention (head dims 64, 72, 88,
// 128), the fused layouts and the real widths run inside the engine: cuda against ref.
TEST_F(CudaEngineTest, CatalogShapesEqualTheRefKernels) {
  auto host = NewCpuDevice();
  auto ref = CreateKernels("ref", host.get());
  ASSERT_TRUE(ref.ok());
  struct Case {
    const char* id;
    std::vector<BlockGroup> blocks;
  };
  const std::vector<Case> cases = {{"pixart-alpha", {{BlockFamily::kCross, 1}}},
                                   {"hunyuandit-v1.2", {{BlockFamily::kCross, 1}}},
                                   {"sd3-medium", {{BlockFamily::kJoint, 1}}},
                                   {"flux.1-dev", {{BlockFamily::kJoint, 1}, {BlockFamily::kSingle, 1}}}};
  for (const Case& c : cases) {
    ModelSpec m = **Cat().Model(c.id);
    m.blocks = c.blocks;
    const Workload w{c.id, 256, 256, 1, 1, 1, OutputType::kLatent};
    auto a = Run(k_.get(), m, w, ParallelConfig{}, 0, EngineOptions{});
    auto b = Run(ref->get(), m, w, ParallelConfig{}, 0, EngineOptions{});
    ASSERT_TRUE(a.ok() && b.ok()) << c.id << ": " << a.status().ToString() << " / " << b.status().ToString();
    // bf16 through a whole block at real widths: the norm-wise error in the bf16 band
    // (between 1e-3 and 1e-2), and no element far off (a wrong tile or row would be O(1)).
    const Mat da = Delta(a->latents[0], m, w), db = Delta(b->latents[0], m, w);
    const double norm_err = (da - db).norm() / db.norm();
    EXPECT_LE(norm_err, 1e-2) << c.id;
    EXPECT_LE(MaxRelativeError(da, db), 4e-2) << c.id << " (norm-wise " << norm_err << ")";
  }
}

TEST_F(CudaEngineTest, GeneratedWeightsAndExtrasEqualTheRefKernels) {
  auto host = NewCpuDevice();
  auto ref = CreateKernels("ref", host.get());
  ASSERT_TRUE(ref.ok());
  for (const char* id : {"tiny-pixart", "tiny-sd3", "tiny-flux"}) {
    const ModelSpec& m = **Cat().Model(id);
    const Workload w{id, 128, 128, 1, 2, 1, OutputType::kLatent};
    auto a = Run(k_.get(), m, w, ParallelConfig{}, 0, EngineOptions{});
    auto b = Run(ref->get(), m, w, ParallelConfig{}, 0, EngineOptions{});
    ASSERT_TRUE(a.ok() && b.ok()) << id << ": " << a.status().ToString() << " / " << b.status().ToString();
    EXPECT_LE(MaxRelativeError(Delta(a->latents[0], m, w), Delta(b->latents[0], m, w)), 2e-2) << id;
  }
}

TEST_F(CudaEngineTest, EveryRankOfAPlanRuns) {
  const ModelSpec& m = **Cat().Model("tiny-flux");
  const Workload w{"tiny-flux", 128, 128, 1, 2, 2, OutputType::kLatent};
  for (const char* spec : {"ulysses=2", "ring=2,tp=2", "pipefusion=3,patches=4,warmup=1", "cfg=1,dp=2"}) {
    const ParallelConfig c = *ParseParallelConfig(spec);
    for (int r = 0; r < c.world_size(); ++r) {
      auto out = Run(k_.get(), m, w, c, r, EngineOptions{});
      ASSERT_TRUE(out.ok()) << spec << " rank " << r << ": " << out.status().ToString();
      EXPECT_EQ(out->step_seconds.size(), 2u);
    }
  }
}

}  // namespace
}  // namespace ditune::exec
