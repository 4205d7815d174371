// Every parallel method against the serial forward on tiny models, under mpirun with 2 and 4
// ranks. Each test runs when the launched world has its configuration's size.
#include <gtest/gtest.h>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/parallel.h"
#include "tests/executor/mpi_test_util.h"

namespace ditune::exec {
namespace {

struct Case {
  const char* model;
  const char* config;
  const char* reference;  // the serial configuration to compare with ("" = plain serial)
  int batch;
};

void Check(const Case& c) {
  const ParallelConfig config = *ParseParallelConfig(c.config);
  if (config.world_size() != World()->size()) GTEST_SKIP() << "needs " << config.world_size() << " ranks";
  const ModelSpec& m = **Cat().Model(c.model);
  const Workload w{c.model, 64, 64, 1, 3, c.batch, OutputType::kLatent};
  auto runner = ParallelRunner::Create(m, w, config, World(), 42);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  auto par = (*runner)->Generate();
  ASSERT_TRUE(par.ok()) << par.status().ToString();
  auto local = CreateComm("local", nullptr, nullptr);
  auto ref_runner = ParallelRunner::Create(m, w, *ParseParallelConfig(c.reference), local->get(), 42);
  ASSERT_TRUE(ref_runner.ok()) << ref_runner.status().ToString();
  auto ref = (*ref_runner)->Generate();
  ASSERT_TRUE(ref.ok());
  ASSERT_EQ(par->latents.size(), ref->latents.size());
  for (size_t i = 0; i < ref->latents.size(); ++i) {
    EXPECT_LE(MaxRelativeError(par->latents[i], ref->latents[i]), 1e-4)
        << c.model << " " << c.config << " rank " << World()->rank() << " prompt " << i;
  }
}

// 2 ranks.
TEST(Parallel2, Ulysses) { Check({"tiny-pixart", "ulysses=2", "", 1}); }
TEST(Parallel2, UlyssesJoint) { Check({"tiny-sd3", "ulysses=2", "", 1}); }
TEST(Parallel2, UlyssesSingle) { Check({"tiny-flux", "ulysses=2", "", 1}); }
TEST(Parallel2, Ring) { Check({"tiny-pixart", "ring=2", "", 1}); }
TEST(Parallel2, RingJointSingle) { Check({"tiny-flux", "ring=2", "", 1}); }
TEST(Parallel2, TensorParallel) { Check({"tiny-sd3", "tp=2", "", 1}); }
TEST(Parallel2, Cfg) { Check({"tiny-pixart", "cfg=2", "", 1}); }
TEST(Parallel2, DataParallel) { Check({"tiny-sd3", "dp=2", "", 2}); }
TEST(Parallel2, PipeFusionWarm) { Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=3", "", 1}); }
TEST(Parallel2, PipeFusionStale) {
  Check({"tiny-pixart", "pipefusion=2,patches=4,warmup=1", "patches=4,warmup=1", 1});
}

// 4 ranks.
TEST(Parallel4, Usp) { Check({"tiny-flux", "ulysses=2,ring=2", "", 1}); }
TEST(Parallel4, UspJoint) { Check({"tiny-sd3", "ulysses=2,ring=2", "", 1}); }
TEST(Parallel4, Ulysses4) { Check({"tiny-pixart", "ulysses=4", "", 1}); }
TEST(Parallel4, Ring4) { Check({"tiny-sd3", "ring=4", "", 1}); }
TEST(Parallel4, UlyssesCfg) { Check({"tiny-pixart", "ulysses=2,cfg=2", "", 1}); }
TEST(Parallel4, TpUlysses) { Check({"tiny-sd3", "ulysses=2,tp=2", "", 1}); }
TEST(Parallel4, RingDp) { Check({"tiny-pixart", "ring=2,dp=2", "", 2}); }
TEST(Parallel4, PipeFusionCfg) {
  Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=1,cfg=2", "patches=2,warmup=1", 1});
}

}  // namespace
}  // namespace ditune::exec
