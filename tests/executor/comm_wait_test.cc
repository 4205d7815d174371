// Waiting on peers: completion, reported errors, the timeout and its setting.
#include "executor/comm_wait.h"

#include "executor/comm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace ditune::exec {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST(CommWaitTest, ReturnsOnceTheTransferIsDone) {
  int polls = 0;
  PollOps ops;
  ops.test = [&]() -> StatusOr<bool> { return ++polls == 50; };
  EXPECT_TRUE(PollUntilDone("all-to-all", 10, ops).ok());
  EXPECT_EQ(polls, 50);
}

TEST(CommWaitTest, PassesOnTheTransfersAndTheBackendsErrors) {
  PollOps failing;
  failing.test = []() -> StatusOr<bool> { return Status::Unavailable("MPI receive failed: truncated"); };
  EXPECT_EQ(PollUntilDone("receive", 10, failing).message(), "MPI receive failed: truncated");

  int polls = 0;
  PollOps sick;
  sick.test = []() -> StatusOr<bool> { return false; };
  sick.health = [&]() { return ++polls < 3 ? Status::Ok() : Status::Unavailable("remote process exited"); };
  const Status st = PollUntilDone("all-gather", 10, sick);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(), "remote process exited");
  EXPECT_EQ(polls, 3);
}

TEST(CommWaitTest, AStalledPeerEndsTheWaitAfterTheTimeout) {
  PollOps never;
  never.test = []() -> StatusOr<bool> { return false; };
  const auto start = std::chrono::steady_clock::now();
  const Status st = PollUntilDone("MPI all-to-all", 0.2, never);
  const double waited = Seconds(start);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("MPI all-to-all did not complete within 0.2 s"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("DITUNE_COMM_TIMEOUT_S"), std::string::npos) << st.message();
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 5.0);
}

TEST(CommWaitTest, ALongWaitOutlastsTheSpinAndZeroWaitsForever) {
  // Past the first second the wait sleeps between polls; with timeout 0 it never gives up.
  const auto start = std::chrono::steady_clock::now();
  int polls = 0;
  PollOps slow;
  slow.test = [&]() -> StatusOr<bool> {
    ++polls;
    return Seconds(start) > 1.3;
  };
  EXPECT_TRUE(PollUntilDone("barrier", 0, slow).ok());
  EXPECT_GT(Seconds(start), 1.3);
  // Sleeping a millisecond per poll after the first second: at most a few hundred polls then.
  EXPECT_GT(polls, 10);
}

// The tight phase polls back to back, running `health` (and reading the clock) only once per
// kTightPollsPerClockRead polls; the yielding phase runs it after every poll. So the polls
// between health checks tell which phase a poll ran in.
TEST(CommWaitTest, AQuickTransferCompletesInTheTightPhase) {
  constexpr int kPolls = 40 * kTightPollsPerClockRead;
  int polls = 0, checks = 0;
  PollOps ops;
  ops.test = [&]() -> StatusOr<bool> { return ++polls == kPolls; };
  ops.health = [&]() {
    ++checks;
    return Status::Ok();
  };
  ops.spin_s = 10;  // far longer than the polls take
  EXPECT_TRUE(PollUntilDone("send", 10, ops).ok());
  EXPECT_EQ(polls, kPolls);
  EXPECT_EQ(checks, kPolls / kTightPollsPerClockRead - 1);  // none after the completing poll

  // Without a tight phase every unfinished poll yields and checks.
  polls = checks = 0;
  ops.spin_s = 0;
  EXPECT_TRUE(PollUntilDone("send", 10, ops).ok());
  EXPECT_EQ(checks, kPolls - 1);
}

TEST(CommWaitTest, TheTightPhaseEndsAfterItsBudgetAndTheWaitGoesOnYielding) {
  // Polls counted at each health check: gaps of kTightPollsPerClockRead, then gaps of 1.
  const auto start = std::chrono::steady_clock::now();
  int polls = 0;
  std::vector<int> at;
  PollOps ops;
  ops.test = [&]() -> StatusOr<bool> {
    ++polls;
    return Seconds(start) > 0.05;
  };
  ops.health = [&]() {
    at.push_back(polls);
    return Status::Ok();
  };
  ops.spin_s = 0.005;
  EXPECT_TRUE(PollUntilDone("receive", 10, ops).ok());
  ASSERT_GE(at.size(), 3u);
  EXPECT_EQ(at[0], kTightPollsPerClockRead);
  EXPECT_EQ(at[1] - at[0], kTightPollsPerClockRead);
  EXPECT_EQ(at[at.size() - 1] - at[at.size() - 2], 1);
}

TEST(CommWaitTest, TheTimeoutAndErrorsHoldInTheTightPhase) {
  // A never-completing transfer times out with the same message whether or not the tight
  // phase outlasts the limit.
  for (double spin_s : {0.05, 100.0}) {
    PollOps never;
    never.test = []() -> StatusOr<bool> { return false; };
    never.spin_s = spin_s;
    const auto start = std::chrono::steady_clock::now();
    const Status st = PollUntilDone("MPI receive", 0.2, never);
    const double waited = Seconds(start);
    EXPECT_EQ(st.code(), Status::Code::kUnavailable) << spin_s;
    EXPECT_EQ(st.message(),
              "MPI receive did not complete within 0.2 s: a peer rank stalled or died (DITUNE_COMM_TIMEOUT_S sets "
              "the limit; 0 waits forever)");
    EXPECT_GE(waited, 0.2);
    EXPECT_LT(waited, 5.0);
  }
  PollOps failing;
  failing.test = []() -> StatusOr<bool> { return Status::Unavailable("MPI receive failed: truncated"); };
  failing.spin_s = 1;
  EXPECT_EQ(PollUntilDone("receive", 10, failing).message(), "MPI receive failed: truncated");
  PollOps sick;
  sick.test = []() -> StatusOr<bool> { return false; };
  sick.health = []() { return Status::Unavailable("remote process exited"); };
  sick.spin_s = 1;
  EXPECT_EQ(PollUntilDone("all-gather", 10, sick).message(), "remote process exited");
}

TEST(CommWaitTest, TheSpinComesFromTheEnvironmentAndOversubscriptionTurnsItOff) {
  ::unsetenv(kCommSpinEnv);
  EXPECT_EQ(*CommSpinFromEnv(false), kDefaultCommSpinS);
  EXPECT_EQ(*CommSpinFromEnv(true), 0.0);
  ::setenv(kCommSpinEnv, "35", 1);  // a setting holds either way
  EXPECT_DOUBLE_EQ(*CommSpinFromEnv(false), 35e-6);
  EXPECT_DOUBLE_EQ(*CommSpinFromEnv(true), 35e-6);
  ::setenv(kCommSpinEnv, "0", 1);
  EXPECT_EQ(*CommSpinFromEnv(false), 0.0);
  for (const char* bad : {"-1", "fast", "20us", "nan"}) {
    ::setenv(kCommSpinEnv, bad, 1);
    auto t = CommSpinFromEnv(false);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(t.status().message().find(std::string("DITUNE_COMM_SPIN_US='") + bad + "'"), std::string::npos)
        << t.status().message();
  }
  ::unsetenv(kCommSpinEnv);

  const char* launcher = std::getenv("OMPI_MCA_mpi_oversubscribe");
  const std::string saved = launcher != nullptr ? launcher : "";
  ::unsetenv("OMPI_MCA_mpi_oversubscribe");
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_FALSE(RanksOversubscribed(1, 0));
  if (cores > 0) {  // the host's cores when the ranks' own are unknown
    EXPECT_FALSE(RanksOversubscribed(cores, 0));
    EXPECT_TRUE(RanksOversubscribed(cores + 1, 0));
  }
  EXPECT_FALSE(RanksOversubscribed(2, 2));
  EXPECT_TRUE(RanksOversubscribed(2, 1));  // two ranks pinned to one core
  EXPECT_TRUE(RanksOversubscribed(8, 2));
  ::setenv("OMPI_MCA_mpi_oversubscribe", "1", 1);
  EXPECT_TRUE(RanksOversubscribed(1, 4));
  ::setenv("OMPI_MCA_mpi_oversubscribe", "0", 1);
  EXPECT_FALSE(RanksOversubscribed(1, 4));
  if (launcher != nullptr) {
    ::setenv("OMPI_MCA_mpi_oversubscribe", saved.c_str(), 1);
  } else {
    ::unsetenv("OMPI_MCA_mpi_oversubscribe");
  }
}

TEST(CommWaitTest, TheTimeoutComesFromTheEnvironment) {
  ::unsetenv(kCommTimeoutEnv);
  EXPECT_EQ(*CommTimeoutFromEnv(), kDefaultCommTimeoutS);
  ::setenv(kCommTimeoutEnv, "30", 1);
  EXPECT_EQ(*CommTimeoutFromEnv(), 30.0);
  ::setenv(kCommTimeoutEnv, "0", 1);
  EXPECT_EQ(*CommTimeoutFromEnv(), 0.0);
  ::setenv(kCommTimeoutEnv, "2.5", 1);
  EXPECT_EQ(*CommTimeoutFromEnv(), 2.5);
  for (const char* bad : {"-1", "ten", "5s", "nan", "inf"}) {
    ::setenv(kCommTimeoutEnv, bad, 1);
    auto t = CommTimeoutFromEnv();
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(t.status().message().find(std::string("DITUNE_COMM_TIMEOUT_S='") + bad + "'"), std::string::npos)
        << t.status().message();
    EXPECT_NE(t.status().message().find(">= 0"), std::string::npos);
  }
  ::unsetenv(kCommTimeoutEnv);
}

}  // namespace
}  // namespace ditune::exec

namespace ditune::exec {
namespace {

// A request that fails or succeeds when waited on, counting its waits.
class FakeRequest : public Request {
 public:
  FakeRequest(Status result, int* waits) : result_(std::move(result)), waits_(waits) {}
  Status Wait() override {
    ++*waits_;
    return result_;
  }

 private:
  Status result_;
  int* waits_;
};

TEST(RequestGroupTest, TheFirstFailureEndsTheWait) {
  // A ring shift whose peer stalled: its send times out; its receive must not be waited on
  // for a second timeout.
  int waits = 0;
  RequestGroup group;
  group.Add(std::make_unique<FakeRequest>(Status::Unavailable("MPI send did not complete within 3 s"), &waits));
  group.Add(std::make_unique<FakeRequest>(Status::Unavailable("MPI receive did not complete within 3 s"), &waits));
  Status s = group.Wait();
  EXPECT_EQ(s.message(), "MPI send did not complete within 3 s");
  EXPECT_EQ(waits, 1);

  int ok_waits = 0;
  RequestGroup fine;
  for (int i = 0; i < 3; ++i) fine.Add(std::make_unique<FakeRequest>(Status::Ok(), &ok_waits));
  EXPECT_TRUE(fine.Wait().ok());
  EXPECT_EQ(ok_waits, 3);
}

}  // namespace
}  // namespace ditune::exec
