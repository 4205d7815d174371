#include <cmath>

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/engine.h"
#include "executor/engine_run.h"
#include "executor/kernels.h"
#include "executor/tensor.h"

namespace ditune::exec {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

Mat NaiveAttention(const Mat& q, const Mat& k, const Mat& v, int heads, int d) {
  Mat out(q.rows(), heads * d);
  for (int h = 0; h < heads; ++h) {
    Mat s = (q.middleCols(h * d, d) * k.middleCols(h * d, d).transpose()) / std::sqrt(static_cast<float>(d));
    for (int i = 0; i < s.rows(); ++i) {
      s.row(i) = (s.row(i).array() - s.row(i).maxCoeff()).exp().matrix();
      s.row(i) /= s.row(i).sum();
    }
    out.middleCols(h * d, d) = s * v.middleCols(h * d, d);
  }
  return out;
}

TEST(TensorTest, BlockwiseAttentionEqualsTheNaiveOne) {
  const Mat q = RandomMat(37, 4 * 16, 1.0f, 1, 1), k = RandomMat(300, 64, 1.0f, 1, 2), v = RandomMat(300, 64, 1.0f, 1, 3);
  const Mat naive = NaiveAttention(q, k, v, 4, 16);
  EXPECT_LT(MaxRelativeError(Attention(q, k, v, 4, 16), naive), 1e-5);
  // Keys in uneven blocks, as Ring delivers them.
  OnlineSoftmax s(q.rows(), 4, 16);
  s.Add(q, k.topRows(100), v.topRows(100), 7);
  s.Add(q, k.bottomRows(200), v.bottomRows(200), 64);
  EXPECT_LT(MaxRelativeError(s.Finish(), naive), 1e-5);
}

// One generation of `config` on one device with the cpu kernels (fp32).
StatusOr<EngineResult> Generate1(const char* model, const char* config, int steps = 3, int batch = 1) {
  const ModelSpec& m = **Cat().Model(model);
  Workload w{model, 64, 64, m.modality == Modality::kVideo ? 9 : 1, steps, batch, OutputType::kLatent};
  DITUNE_ASSIGN_OR_RETURN(auto device, CreateDevice("cpu"));
  DITUNE_ASSIGN_OR_RETURN(auto kernels, CreateKernels("cpu", device.get()));
  DITUNE_ASSIGN_OR_RETURN(ParallelConfig c, ParseParallelConfig(config));
  DITUNE_ASSIGN_OR_RETURN(EngineWork work, EngineWorkFor(m, w, c, 0));
  DITUNE_ASSIGN_OR_RETURN(auto engine, DitEngine::Create(m, w, work, kernels.get(), EngineOptions{}));
  return engine->Generate();
}

TEST(ExecutorTest, GenerationIsDeterministicAndFinite) {
  for (const char* model : {"tiny-pixart", "tiny-sd3", "tiny-flux"}) {
    auto a = Generate1(model, "");
    auto b = Generate1(model, "");
    ASSERT_TRUE(a.ok() && b.ok()) << model << ": " << a.status().ToString();
    ASSERT_EQ(a->latents.size(), 1u);
    EXPECT_EQ(a->latents[0], b->latents[0]) << model;
    EXPECT_TRUE(a->latents[0].allFinite()) << model;
    EXPECT_GT(a->latents[0].norm(), 0.0f);
    EXPECT_EQ(a->step_seconds.size(), 3u);
    EXPECT_GT(a->dit_seconds, 0.0);
  }
}

// PipeFusion's patches with every step synchronous are the model; with fewer warm-up steps
// the stale K/V makes a (slightly) different result. Joint and single blocks: the first patch
// of a step carries the text.
TEST(ExecutorTest, PipeFusionWithFullWarmupEqualsOneForward) {
  for (const char* model : {"tiny-pixart", "tiny-sd3", "tiny-flux"}) {
    auto serial = Generate1(model, "", 4);
    auto patched = Generate1(model, "patches=4,warmup=4", 4);
    ASSERT_TRUE(serial.ok() && patched.ok()) << model << ": " << patched.status().ToString();
    EXPECT_LT(MaxRelativeError(patched->latents[0], serial->latents[0]), 1e-5) << model;
    auto stale = Generate1(model, "patches=4,warmup=1", 4);
    ASSERT_TRUE(stale.ok());
    EXPECT_GT(MaxRelativeError(stale->latents[0], serial->latents[0]), 1e-6) << model;
  }
}

TEST(ExecutorTest, WrongSizesAreClearErrors) {
  auto comm = CreateComm("local", nullptr, nullptr);
  ASSERT_TRUE(comm.ok());
  const ModelSpec& m = **Cat().Model("tiny-pixart");
  const Workload w{"tiny-pixart", 64, 64, 1, 2, 1, OutputType::kLatent};
  EngineRunOptions ro;
  ro.kernels = "cpu";
  ro.world = comm->get();
  auto size = MeasureEngineRun(m, w, *ParseParallelConfig("ulysses=2"), ro);
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("needs 2 ranks; 1 were launched"), std::string::npos);
  ro.kernels = "tpu";
  auto kernels = MeasureEngineRun(m, w, ParallelConfig{}, ro);
  ASSERT_FALSE(kernels.ok());
  EXPECT_NE(kernels.status().message().find("tpu"), std::string::npos) << kernels.status().ToString();
  EXPECT_FALSE(CreateComm("carrier-pigeon", nullptr, nullptr).ok());
}

}  // namespace
}  // namespace ditune::exec

#include "executor/device.h"

namespace ditune::exec {
namespace {

TEST(DeviceTest, CpuDeviceAccountsAndTimes) {
  auto dev = CreateDevice("cpu");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  const DeviceProps& p = (*dev)->props();
  EXPECT_EQ(p.backend, "cpu");
  EXPECT_GT(p.memory_bytes, 0);
  EXPECT_GE(p.compute_units, 1);
  {
    auto a = (*dev)->Alloc(1 << 20);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ((*dev)->allocated_bytes(), 1 << 20);
    auto b = (*dev)->Alloc(1 << 10);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*dev)->peak_bytes(), (1 << 20) + (1 << 10));
  }
  EXPECT_EQ((*dev)->allocated_bytes(), 0);
  auto huge = (*dev)->Alloc(p.memory_bytes + 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("would exceed"), std::string::npos);
  auto e0 = (*dev)->stream()->Record();
  ASSERT_TRUE((*dev)->stream()->Synchronize().ok());
  auto e1 = (*dev)->stream()->Record();
  EXPECT_GE(*(*e1)->SecondsSince(**e0), 0.0);
  EXPECT_FALSE(CreateDevice("cuda-nope").ok());
}

}  // namespace
}  // namespace ditune::exec
