#include "core/parallel_for.h"

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ditune {
namespace {

TEST(ParallelForTest, CallsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
      std::vector<std::atomic<int>> calls(n);
      ParallelFor(n, [&](size_t i) { calls[i].fetch_add(1); }, threads);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

TEST(ParallelForTest, OneThreadRunsInOrderOnTheCaller) {
  std::vector<size_t> order;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  ParallelFor(5, [&](size_t i) {
    order.push_back(i);
    same_thread &= std::this_thread::get_id() == caller;
  }, 1);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(same_thread);
}

TEST(ParallelForTest, ManyThreadsShareTheWork) {
  // Each call waits until a second thread has started one: a pool that ran everything on one
  // thread would never see two at once.
  std::atomic<int> running{0}, most{0};
  ParallelFor(64, [&](size_t) {
    const int now = running.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    for (int spin = 0; spin < 2000 && most.load() < 2; ++spin) std::this_thread::yield();
    running.fetch_sub(1);
  }, 4);
  EXPECT_GE(most.load(), 2);
}

TEST(ParallelForTest, HostThreadsReadsTheEnvironment) {
  ::setenv("DITUNE_THREADS", "3", 1);
  EXPECT_EQ(HostThreads(), 3);
  ::setenv("DITUNE_THREADS", "zero", 1);  // not a positive integer: the hardware's count
  EXPECT_GE(HostThreads(), 1);
  ::setenv("DITUNE_THREADS", "-2", 1);
  EXPECT_GE(HostThreads(), 1);
  ::unsetenv("DITUNE_THREADS");
  EXPECT_GE(HostThreads(), 1);
}

TEST(ParallelForTest, NestedCallsRunOnTheirWorkersThread) {
  // An inner ParallelFor inside an outer one's fn starts no threads of its own.
  std::atomic<int> off_thread{0};
  std::vector<std::atomic<int>> calls(4 * 16);
  ParallelFor(4, [&](size_t outer) {
    const auto worker = std::this_thread::get_id();
    ParallelFor(16, [&](size_t inner) {
      calls[outer * 16 + inner].fetch_add(1);
      if (std::this_thread::get_id() != worker) off_thread.fetch_add(1);
    }, 8);
  }, 4);
  EXPECT_EQ(off_thread.load(), 0);
  for (auto& c : calls) EXPECT_EQ(c.load(), 1);
}

}  // namespace
}  // namespace ditune
