// The ranks of one run agree on it before the first transfer (executor/rank_agreement.h), and
// calibrate comm's flags are checked alike on every rank (executor/microbench.h).
#include <gtest/gtest.h>

#include "core/catalog.h"
#include "executor/microbench.h"
#include "executor/rank_agreement.h"

namespace ditune::exec {
namespace {

RankIntent Intent(const char* height, const char* config) {
  RankIntent i;
  i.fields = {{"--model", "flux.1-dev"}, {"--height", height}, {"configuration", config}};
  return i;
}

TEST(RankAgreementTest, EqualIntentsAgree) {
  const std::string a = EncodeIntent(Intent("1024", "ulysses=2"));
  EXPECT_TRUE(CompareIntents({a, a, a, a}, 2, Status::Ok()).ok());
}

TEST(RankAgreementTest, EveryDifferenceIsNamedWithBothValues) {
  const std::string a = EncodeIntent(Intent("1024", "ulysses=2"));
  const std::string b = EncodeIntent(Intent("512", "ring=2"));
  for (int me : {0, 1}) {
    Status st = CompareIntents({a, b}, me, Status::Ok());
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(st.message().find("--height: rank 0 has '1024', rank 1 '512'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("configuration: rank 0 has 'ulysses=2', rank 1 'ring=2'"), std::string::npos);
    EXPECT_EQ(st.message().find("--model"), std::string::npos) << st.message();
  }
}

TEST(RankAgreementTest, ARefusingRankStopsEveryRankWithItsMessage) {
  const std::string ok = EncodeIntent(Intent("1024", "ulysses=2"));
  RankIntent refused;
  refused.refused = Status::Infeasible("no configuration fits");
  const std::string bad = EncodeIntent(refused);
  // The refusing rank keeps its own status; the others name it, with its exit status.
  Status on_bad = CompareIntents({ok, bad}, 1, refused.refused);
  EXPECT_EQ(on_bad.message(), "no configuration fits");
  Status on_ok = CompareIntents({ok, bad}, 0, Status::Ok());
  EXPECT_EQ(on_ok.code(), Status::Code::kInfeasible);
  EXPECT_EQ(on_ok.message(), "rank 1 of 2 refused its input, so the job stops: no configuration fits");
  RankIntent bad_input;
  bad_input.refused = Status::InvalidArgument("--db: a directory");
  EXPECT_EQ(CompareIntents({ok, EncodeIntent(bad_input)}, 0, Status::Ok()).code(), Status::Code::kInvalidArgument);
}

TEST(RankAgreementTest, LongIntentsAreCutToTheBound) {
  RankIntent big;
  big.fields = {{"--model", std::string(5000, 'x')}};
  EXPECT_EQ(EncodeIntent(big).size(), kMaxIntentChars);
}

TEST(CommSweepFlagsTest, IterationsLinksAndMemoryAreChecked) {
  auto catalog = Catalog::Load(DITUNE_TEST_DATA_DIR);
  ASSERT_TRUE(catalog.ok());
  EXPECT_TRUE(CheckCommSweepFlags(*catalog, "shm", 10, false, "mpi").ok());
  EXPECT_TRUE(CheckCommSweepFlags(*catalog, "nvlink4", 10, true, "nccl").ok());
  EXPECT_TRUE(CheckCommSweepFlags(*catalog, "ib-ndr", 10, false, "mpi").ok());  // between hosts
  for (int iters : {0, -1, kMaxCommSweepIters + 1}) {
    EXPECT_NE(CheckCommSweepFlags(*catalog, "shm", iters, false, "mpi").message().find("--iters"), std::string::npos);
  }
  EXPECT_NE(CheckCommSweepFlags(*catalog, "junk", 10, false, "mpi").message().find("--link"), std::string::npos);
  Status host = CheckCommSweepFlags(*catalog, "nvlink4", 10, false, "mpi");
  EXPECT_NE(host.message().find("the mpi ranks move host memory"), std::string::npos) << host.message();
  EXPECT_FALSE(CheckCommSweepFlags(*catalog, "pcie4", 10, false, "mpi").ok());
  EXPECT_FALSE(CheckCommSweepFlags(*catalog, "shm", 10, true, "nccl").ok());
}

}  // namespace
}  // namespace ditune::exec
