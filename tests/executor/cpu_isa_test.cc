// The CPU kernels per instruction set: the dispatcher's choice and its override, and every
// ISA this machine runs giving the baseline's results within fp32 rounding.
#include "executor/cpu_isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/engine.h"
#include "executor/kernels.h"
#include "executor/tensor.h"

namespace ditune::exec {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

// Restores the ISA the environment chose when a test that forces one ends.
class IsaTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(SetCpuIsa(BestCpuIsa()).ok()); }
};

TEST_F(IsaTest, ChoosesTheBestUsableIsaAndHonoursTheOverride) {
  const std::vector<CpuIsa> usable = UsableCpuIsas();
  ASSERT_FALSE(usable.empty());
  EXPECT_EQ(usable.front(), CpuIsa::kBaseline);
  EXPECT_EQ(BestCpuIsa(), usable.back());
  EXPECT_EQ(*ChooseCpuIsa(nullptr), BestCpuIsa());
  EXPECT_EQ(*ChooseCpuIsa(""), BestCpuIsa());
  for (CpuIsa isa : usable) {
    auto c = ChooseCpuIsa(std::string(CpuIsaName(isa)).c_str());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(*c, isa);
    EXPECT_STREQ(CpuKernelsFor(isa).isa, std::string(CpuIsaName(isa)).c_str());
  }
#if defined(__x86_64__)
  EXPECT_EQ(CompiledCpuIsas().size(), 3u);
  // The dispatcher agrees with the compiler's view of this CPU.
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(CpuIsaUsable(CpuIsa::kV3), v3);
  if (!v3) {
    EXPECT_FALSE(ChooseCpuIsa("v3").ok());
  }
  if (!CpuIsaUsable(CpuIsa::kV4)) {
    auto v4 = ChooseCpuIsa("v4");
    ASSERT_FALSE(v4.ok());
    EXPECT_NE(v4.status().message().find("this CPU lacks its instructions"), std::string::npos);
  }
#endif
}

TEST_F(IsaTest, RefusesUnknownValuesNamingTheValidOnes) {
  for (const char* bad : {"avx9", "V4", "x86-64-v3", " baseline"}) {
    auto c = ChooseCpuIsa(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(c.status().message().find("DITUNE_CPU_ISA"), std::string::npos)
        << c.status().message();
    EXPECT_NE(c.status().message().find("valid values: baseline, v3, v4"), std::string::npos)
        << c.status().message();
  }
}

// A refused environment value is the caller's to report (creating the cpu kernels refuses it);
// a kernel called anyway runs the best ISA this CPU has and never ends the process.
TEST(IsaDeathTest, RefusedEnvironmentValueIsReportedNotFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kCpuIsaEnv, "avx9", 1);
        const bool refused = !ActiveCpuIsa().ok() &&
                             ActiveCpuIsa().status().message().find("DITUNE_CPU_ISA='avx9'") != std::string::npos;
        const Mat m = MatMul(Mat::Ones(2, 2), Mat::Ones(2, 2));
        std::exit(refused && m(0, 0) == 2.0f && std::string(CpuKernels().isa) == CpuIsaName(BestCpuIsa()) ? 7 : 1);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(IsaDeathTest, EnvironmentValueChoosesTheIsa) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kCpuIsaEnv, "baseline", 1);
        std::exit(ActiveCpuIsa().ok() && *ActiveCpuIsa() == CpuIsa::kBaseline &&
                          std::string(CpuKernels().isa) == "baseline"
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(IsaTest, EveryUsableIsaMatchesTheBaseline) {
  // Shapes with ragged edges (not multiples of any vector width or tile).
  const Mat a = RandomMat(133, 70, 1.0f, 9, 1), b = RandomMat(70, 301, 1.0f, 9, 2);
  const Mat q = RandomMat(150, 4 * 16, 1.0f, 9, 3), k = RandomMat(333, 64, 1.0f, 9, 4),
            v = RandomMat(333, 64, 1.0f, 9, 5);
  const Vec shift = RandomMat(1, 301, 0.5f, 9, 6), scale = RandomMat(1, 301, 0.5f, 9, 7);
  ASSERT_TRUE(SetCpuIsa(CpuIsa::kBaseline).ok());
  const Mat gemm = MatMul(a, b);
  const Mat gemm_block = MatMul(a.middleRows(3, 40), b.middleCols(5, 100));
  const Mat attention = Attention(q, k, v, 4, 16);
  const Mat norm = NormModulate(gemm, shift, scale);
  const Mat gelu = Gelu(gemm);
  for (CpuIsa isa : UsableCpuIsas()) {
    SCOPED_TRACE(std::string(CpuIsaName(isa)));
    ASSERT_TRUE(SetCpuIsa(isa).ok());
    EXPECT_LT(MaxRelativeError(MatMul(a, b), gemm), 1e-5);
    EXPECT_LT(MaxRelativeError(MatMul(a.middleRows(3, 40), b.middleCols(5, 100)), gemm_block),
              1e-5);
    Mat acc = MatMul(a, b);
    MatMulInto(a, b, &acc, /*accumulate=*/true);
    EXPECT_LT(MaxRelativeError(acc, Mat(2 * gemm)), 1e-5);
    EXPECT_LT(MaxRelativeError(Attention(q, k, v, 4, 16), attention), 1e-5);
    EXPECT_LT(MaxRelativeError(NormModulate(gemm, shift, scale), norm), 1e-5);
    EXPECT_LT(MaxRelativeError(Gelu(gemm), gelu), 1e-5);
  }
}

TEST_F(IsaTest, TiledAttentionMatchesTheRowLoopOnEveryIsa) {
  const int heads = 3, d = 24;
  const Mat q = RandomMat(200, heads * d, 1.0f, 5, 1), k = RandomMat(700, heads * d, 1.0f, 5, 2),
            v = RandomMat(700, heads * d, 1.0f, 5, 3);
  for (CpuIsa isa : UsableCpuIsas()) {
    SCOPED_TRACE(std::string(CpuIsaName(isa)));
    const CpuKernelTable& t = CpuKernelsFor(isa);
    OnlineSoftmax tiled(q.rows(), heads, d), rows(q.rows(), heads, d);
    auto args = [&](OnlineSoftmax* s, const Mat& kb, const Mat& vb) {
      CpuAttentionArgs a;
      a.q = q.data();
      a.ldq = q.cols();
      a.k = kb.data();
      a.ldk = kb.cols();
      a.v = vb.data();
      a.ldv = vb.cols();
      a.queries = q.rows();
      a.keys = kb.rows();
      a.heads = heads;
      a.head_dim = d;
      a.m = s->m.data();
      a.l = s->l.data();
      a.acc = s->acc.data();
      a.ld_acc = s->acc.cols();
      return a;
    };
    // Two calls, as Ring delivers the keys.
    const Mat k1 = k.topRows(300), v1 = v.topRows(300), k2 = k.bottomRows(400),
              v2 = v.bottomRows(400);
    t.attention(args(&tiled, k1, v1));
    t.attention(args(&tiled, k2, v2));
    t.attention_rowwise(args(&rows, k1, v1));
    t.attention_rowwise(args(&rows, k2, v2));
    EXPECT_LT(MaxRelativeError(tiled.Finish(), rows.Finish()), 1e-5);
    EXPECT_LT(MaxRelativeError(tiled.l, rows.l), 1e-5);
  }
}

// A whole tiny generation on the cpu kernels of the ISA in use.
StatusOr<EngineResult> Generate(const char* model) {
  const ModelSpec& m = **Cat().Model(model);
  Workload w{model, 64, 64, 1, 2, 1, OutputType::kLatent};
  DITUNE_ASSIGN_OR_RETURN(auto device, CreateDevice("cpu"));
  DITUNE_ASSIGN_OR_RETURN(auto kernels, CreateKernels("cpu", device.get()));
  DITUNE_ASSIGN_OR_RETURN(EngineWork work, EngineWorkFor(m, w, ParallelConfig{}, 0));
  DITUNE_ASSIGN_OR_RETURN(auto engine, DitEngine::Create(m, w, work, kernels.get(), EngineOptions{}));
  return engine->Generate();
}

TEST_F(IsaTest, WholeForwardsMatchTheBaseline) {
  for (const char* model : {"tiny-pixart", "tiny-sd3", "tiny-flux"}) {
    SCOPED_TRACE(model);
    ASSERT_TRUE(SetCpuIsa(CpuIsa::kBaseline).ok());
    auto base = Generate(model);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    for (CpuIsa isa : UsableCpuIsas()) {
      SCOPED_TRACE(std::string(CpuIsaName(isa)));
      ASSERT_TRUE(SetCpuIsa(isa).ok());
      auto r = Generate(model);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_LT(MaxRelativeError(r->latents[0], base->latents[0]), 1e-4);
    }
  }
}

}  // namespace
}  // namespace ditune::exec
