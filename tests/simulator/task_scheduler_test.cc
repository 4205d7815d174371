#include "simulator/task_scheduler.h"

#include <gtest/gtest.h>

namespace ditune {
namespace {

TaskSpec T(int stream, double seconds, std::vector<int> deps = {}, int resource = -1) {
  TaskSpec t;
  t.stream = stream;
  t.duration = Seconds(seconds);
  t.deps = std::move(deps);
  t.resource = resource;
  return t;
}

TEST(TaskSchedulerTest, StreamsRunInOrderAndOverlapEachOther) {
  TaskScheduler e;
  const int a = e.AddStream(0, "compute");
  const int b = e.AddStream(0, "comm");
  const int t0 = e.AddTask(T(a, 2));
  const int t1 = e.AddTask(T(b, 5, {t0}));  // waits for t0
  const int t2 = e.AddTask(T(a, 3));        // runs while t1 communicates
  const int t3 = e.AddTask(T(a, 1, {t1}));  // waits for t1
  ASSERT_TRUE(e.Run().ok());
  EXPECT_EQ(e.start(t1).value(), 2);
  EXPECT_EQ(e.start(t2).value(), 2);
  EXPECT_EQ(e.end(t2).value(), 5);
  EXPECT_EQ(e.start(t3).value(), 7);
  EXPECT_EQ(e.makespan().value(), 8);
  EXPECT_EQ(e.last_dep(t3), t1);
}

TEST(TaskSchedulerTest, ResourceSlotsSerialiseSharers) {
  TaskScheduler e;
  const int link = e.AddResource("pcie", 1);
  const int s0 = e.AddStream(0, "comm");
  const int s1 = e.AddStream(1, "comm");
  const int x = e.AddTask(T(s0, 4, {}, link));
  const int y = e.AddTask(T(s1, 4, {}, link));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_EQ(e.start(x).value(), 0);
  EXPECT_EQ(e.start(y).value(), 4);  // ties go to the earlier task, every run
  TaskScheduler two;
  const int wide = two.AddResource("nvlink", 2);
  const int u0 = two.AddStream(0, "comm");
  const int u1 = two.AddStream(1, "comm");
  two.AddTask(T(u0, 4, {}, wide));
  const int z = two.AddTask(T(u1, 4, {}, wide));
  ASSERT_TRUE(two.Run().ok());
  EXPECT_EQ(two.start(z).value(), 0);
}

TEST(TaskSchedulerTest, BadGraphsAreErrors) {
  TaskScheduler e;
  const int s = e.AddStream(0, "compute");
  e.AddTask(T(s, 1, {1}));  // depends on a later task
  e.AddTask(T(s, 1));
  EXPECT_EQ(e.Run().code(), Status::Code::kInternal);
  TaskScheduler order;
  const int a = order.AddStream(0, "compute");
  const int b = order.AddStream(0, "comm");
  const int first = order.AddTask(T(a, 1));
  const int other = order.AddTask(T(b, 1, {first}));
  order.AddTask(T(a, 1, {other}));
  EXPECT_TRUE(order.Run().ok());
  TaskScheduler bad_stream;
  bad_stream.AddTask(T(3, 1));
  EXPECT_FALSE(bad_stream.Run().ok());
}

TEST(TaskSchedulerTest, TasksBeyondTheLimitAreNotKeptAndTheGraphIsRefused) {
  TaskScheduler e;
  e.set_max_tasks(3);
  const int s = e.AddStream(0, "compute");
  for (int i = 0; i < 10; ++i) e.AddTask(T(s, 1));
  EXPECT_EQ(e.num_tasks(), 3);
  EXPECT_EQ(e.dropped_tasks(), 7u);
  const Status st = e.Run();
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("more than the 3"), std::string::npos) << st.message();
  e.Clear();  // a new graph within the limit runs
  const int t = e.AddStream(0, "compute");
  e.AddTask(T(t, 1));
  e.AddTask(T(t, 2, {0}));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.makespan().value(), 3.0);
}

}  // namespace
}  // namespace ditune
