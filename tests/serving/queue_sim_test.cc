// The serving simulation against independent computations: an FCFS multi-server schedule
// computed request by request, and queueing theory (M/D/1 and M/D/c) for the mean wait.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "serving/queue_sim.h"
#include "serving/requests.h"
#include "serving/summary.h"
#include "core/stats.h"

namespace ditune::serving {
namespace {

RequestStream Stream(const std::vector<std::pair<double, int>>& arrivals, int shapes) {
  RequestStream s;
  for (int i = 0; i < shapes; ++i) s.shapes.push_back({"m", 64 * (i + 1), 64, 1, 10});
  for (const auto& [t, shape] : arrivals) s.requests.push_back({static_cast<int>(s.requests.size()), Seconds(t), shape});
  return s;
}

// FCFS to the earliest-free server, computed in arrival order without events: a request
// starts at its arrival on a free server (the fastest for it, then the lowest index), else
// when the first server frees (among those freeing then, the fastest, then the lowest index).
std::vector<Served> IndependentFcfs(const RequestStream& s, const std::vector<Server>& servers,
                                    const ServiceTable& table) {
  std::vector<double> free_at(servers.size(), 0);
  std::vector<Served> out(s.requests.size());
  for (const Request& r : s.requests) {
    const double arrival = r.arrival.value();
    double start = arrival;
    bool any_free = false;
    for (double f : free_at) any_free = any_free || f <= arrival;
    if (!any_free) start = *std::min_element(free_at.begin(), free_at.end());
    int best = -1;
    for (int i = 0; i < static_cast<int>(servers.size()); ++i) {
      const bool candidate = any_free ? free_at[i] <= arrival : free_at[i] == start;
      if (!candidate) continue;
      if (best < 0 || table.Time(r.shape, servers[i].type) < table.Time(r.shape, servers[best].type)) best = i;
    }
    const double finish = start + table.Time(r.shape, servers[best].type).value();
    free_at[best] = finish;
    out[r.id] = {Seconds(start), Seconds(finish), best, 1};
  }
  return out;
}

TEST(QueueSimTest, FcfsEqualsAnIndependentMultiServerScheduleExactly) {
  // Integer arrivals and service times: many requests arrive together and servers free
  // together, so every tie rule is exercised.
  std::mt19937 rng(7);
  std::vector<std::pair<double, int>> arrivals;
  double t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<double>(rng() % 3);  // 0, 1 or 2 s apart
    arrivals.emplace_back(t, static_cast<int>(rng() % 3));
  }
  const RequestStream stream = Stream(arrivals, 3);
  ServiceTable table(3, 2, 1);
  const double seconds[3][2] = {{2, 1}, {3, 2}, {5, 2}};
  for (int s = 0; s < 3; ++s) {
    for (int ty = 0; ty < 2; ++ty) table.Set(s, ty, 1, Seconds(seconds[s][ty]));
  }
  const std::vector<Server> servers = {{0, 0, 1}, {1, 1, 2}, {0, 3, 1}, {0, 4, 1}};
  auto run = SimulateQueue(stream, servers, table, {});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const auto expected = IndependentFcfs(stream, servers, table);
  int waited = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(run->served[i].start.value(), expected[i].start.value()) << "request " << i;
    ASSERT_EQ(run->served[i].finish.value(), expected[i].finish.value()) << "request " << i;
    ASSERT_EQ(run->served[i].server, expected[i].server) << "request " << i;
    waited += expected[i].start.value() > arrivals[i].first;
  }
  EXPECT_GT(waited, 300);  // the load is high enough that queueing is tested, not just idle servers
}

// The mean wait of M/D/c from Crommelin's embedded chain: the number in system D apart obeys
// Q' = max(Q - c, 0) + Poisson(lambda D), so its stationary law is the number in system at
// an arbitrary time; Little's law gives the mean wait.
double TheoryMdcMeanWait(double lambda, double d, int c) {
  const double a = lambda * d;
  const int n = c + 400 + static_cast<int>(40 * a);
  std::vector<double> poisson(n + 1);
  poisson[0] = std::exp(-a);
  for (int k = 1; k <= n; ++k) poisson[k] = poisson[k - 1] * a / k;
  std::vector<double> pi(n + 1, 0), next(n + 1);
  pi[0] = 1;
  for (int iter = 0; iter < 100000; ++iter) {
    std::fill(next.begin(), next.end(), 0);
    for (int q = 0; q <= n; ++q) {
      if (pi[q] == 0) continue;
      const int base = std::max(q - c, 0);
      for (int k = 0; base + k <= n; ++k) next[base + k] += pi[q] * poisson[k];
    }
    double sum = 0, diff = 0;
    for (double v : next) sum += v;
    for (int q = 0; q <= n; ++q) {
      next[q] /= sum;
      diff += std::abs(next[q] - pi[q]);
    }
    pi.swap(next);
    if (diff < 1e-14) break;
  }
  double lq = 0;
  for (int q = c + 1; q <= n; ++q) lq += (q - c) * pi[q];
  return lq / lambda;
}

struct WaitEstimate {
  double mean = 0, stderr_ = 0;
};

// The mean wait of a long Poisson run on `c` servers of service `d`, with its standard error
// from 50 batch means (waits of neighbouring requests are correlated; batches of thousands
// are nearly independent).
WaitEstimate SimulatedMeanWait(double lambda, double d, int c, double duration, uint64_t seed) {
  auto stream = PoissonRequests({{{"m", 64, 64, 1, 10}, 1}}, lambda, Seconds(duration), seed);
  EXPECT_TRUE(stream.ok());
  ServiceTable table(1, 1, 1);
  table.Set(0, 0, 1, Seconds(d));
  std::vector<Server> servers;
  for (int i = 0; i < c; ++i) servers.push_back({0, i, 1});
  auto run = SimulateQueue(*stream, servers, table, {});
  EXPECT_TRUE(run.ok());
  const size_t n = stream->requests.size(), batches = 50, per = n / batches;
  std::vector<double> means;
  for (size_t b = 0; b < batches; ++b) {
    double sum = 0;
    for (size_t i = b * per; i < (b + 1) * per; ++i) {
      sum += (run->served[i].start - stream->requests[i].arrival).value();
    }
    means.push_back(sum / per);
  }
  WaitEstimate e;
  for (double m : means) e.mean += m / batches;
  double var = 0;
  for (double m : means) var += (m - e.mean) * (m - e.mean) / (batches - 1);
  e.stderr_ = std::sqrt(var / batches);
  return e;
}

TEST(QueueSimTest, MeanWaitOfOneServerMatchesPollaczekKhinchine) {
  const double lambda = 0.7, d = 1.0;
  const double rho = lambda * d;
  const double theory = rho * d / (2 * (1 - rho));  // M/D/1
  EXPECT_NEAR(TheoryMdcMeanWait(lambda, d, 1), theory, 1e-6);  // the chain agrees with the closed form
  const WaitEstimate sim = SimulatedMeanWait(lambda, d, 1, 300000, 11);
  EXPECT_NEAR(sim.mean, theory, 4 * sim.stderr_) << "stderr " << sim.stderr_;
  EXPECT_LT(sim.stderr_, 0.05 * theory);  // the run is long enough to tell a wrong simulator
}

TEST(QueueSimTest, MeanWaitOfFourServersMatchesMdc) {
  const double lambda = 3.4, d = 1.0;  // load 0.85
  const double theory = TheoryMdcMeanWait(lambda, d, 4);
  const WaitEstimate sim = SimulatedMeanWait(lambda, d, 4, 100000, 5);
  EXPECT_NEAR(sim.mean, theory, 4 * sim.stderr_) << "theory " << theory << " stderr " << sim.stderr_;
  EXPECT_LT(sim.stderr_, 0.05 * theory);
  // Four servers wait far less than one server four times as fast would suggest otherwise:
  // the M/D/4 figure is not the M/D/1 one.
  EXPECT_GT(std::abs(theory - 0.85 * 0.25 / (2 * 0.15)), 4 * sim.stderr_);
}

TEST(QueueSimTest, ALayoutThatCannotHoldTheRateIsUnstableWithoutPercentiles) {
  auto stream = PoissonRequests({{{"m", 64, 64, 1, 10}, 1}}, 2.5, Seconds(2000), 3);
  ASSERT_TRUE(stream.ok());
  ServiceTable table(1, 1, 1);
  table.Set(0, 0, 1, Seconds(1));
  const std::vector<Server> servers = {{0, 0, 1}, {0, 1, 1}};
  auto run = SimulateQueue(*stream, servers, table, {});
  ASSERT_TRUE(run.ok());
  SummaryInputs in;
  in.rate_rps = 2.5;
  in.capacity_rps = CapacityRps(*stream, servers, table, {}, 2);
  in.gpus = 2;
  EXPECT_DOUBLE_EQ(in.capacity_rps, 2.0);
  const ServeSummary s = Summarize(*stream, *run, in);
  EXPECT_FALSE(s.stable);
  EXPECT_NE(s.unstable_reason.find("offered load is 1.25"), std::string::npos) << s.unstable_reason;
  EXPECT_GT(run->backlog_at_last_arrival, 500);  // the queue did grow through the run
  // The same servers at a rate they hold are stable.
  auto slow = PoissonRequests({{{"m", 64, 64, 1, 10}, 1}}, 1.0, Seconds(2000), 3);
  auto run2 = SimulateQueue(*slow, servers, table, {});
  in.rate_rps = 1.0;
  const ServeSummary ok = Summarize(*slow, *run2, in);
  EXPECT_TRUE(ok.stable) << ok.unstable_reason;
  EXPECT_GE(ok.p99.value(), 1.0);
  EXPECT_NEAR(ok.utilisation, 0.5, 0.03);
}

TEST(QueueSimTest, SizeAwareRoutingSendsLargeRequestsToLargeReplicas) {
  // Shape 1 is large: 8 s on a 1-GPU replica, 1.5 s on a 4-GPU one.
  ServiceTable table(2, 2, 1);
  table.Set(0, 0, 1, Seconds(1));
  table.Set(0, 1, 1, Seconds(0.4));
  table.Set(1, 0, 1, Seconds(8));
  table.Set(1, 1, 1, Seconds(1.5));
  const std::vector<Server> servers = {{0, 0, 1}, {1, 4, 4}};
  // The 4-GPU replica is busy with a small request when the large one arrives.
  const RequestStream stream = Stream({{0, 0}, {0.1, 1}}, 2);
  QueueOptions fcfs;
  auto a = SimulateQueue(stream, servers, table, fcfs);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->served[0].server, 1);  // the fastest free replica for it
  EXPECT_EQ(a->served[1].server, 0);  // FCFS: the free replica, slow for it
  EXPECT_DOUBLE_EQ(a->served[1].finish.value(), 8.1);
  QueueOptions size_aware;
  size_aware.policy = Policy::kSizeAware;
  auto b = SimulateQueue(stream, servers, table, size_aware);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->served[1].server, 1);  // waits 0.3 s for the large replica, finishes at 1.9 s
  EXPECT_DOUBLE_EQ(b->served[1].start.value(), 0.4);
  EXPECT_DOUBLE_EQ(b->served[1].finish.value(), 1.9);
}

TEST(QueueSimTest, DynamicDegreeTakesTheFewestGpusThatMeetTheDeadline) {
  ServiceTable table(1, 2, 1);
  table.Set(0, 0, 1, Seconds(4));    // one GPU
  table.Set(0, 1, 1, Seconds(1.5));  // four GPUs
  const auto servers = DynamicPlacements(4, 4, {1, 4});
  ASSERT_EQ(servers.size(), 5u);  // four single GPUs and the whole node
  const RequestStream stream = Stream({{0, 0}, {0, 0}, {10, 0}}, 1);
  QueueOptions fastest;
  fastest.policy = Policy::kDynamic;
  auto a = SimulateQueue(stream, servers, table, fastest);
  ASSERT_TRUE(a.ok());
  // Without a deadline: the earliest finish, all four GPUs, one request after the other.
  EXPECT_EQ(servers[a->served[0].server].gpus, 4);
  EXPECT_DOUBLE_EQ(a->served[1].start.value(), 1.5);
  EXPECT_DOUBLE_EQ(a->served[1].finish.value(), 3.0);
  QueueOptions deadline = fastest;
  deadline.deadline = Seconds(5);
  auto b = SimulateQueue(stream, servers, table, deadline);
  ASSERT_TRUE(b.ok());
  // With 5 s: one GPU each meets it, and both start at once on different GPUs.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(servers[b->served[i].server].gpus, 1) << i;
  EXPECT_NE(servers[b->served[0].server].first_gpu, servers[b->served[1].server].first_gpu);
  EXPECT_DOUBLE_EQ(b->served[1].finish.value(), 4.0);
  EXPECT_DOUBLE_EQ(b->busy_gpu_s, 12.0);
}

TEST(QueueSimTest, DynamicPlacementsNeverShareAGpuAtOnce) {
  ServiceTable table(2, 3, 1);
  for (int s = 0; s < 2; ++s) {
    table.Set(s, 0, 1, Seconds(3 + s));
    table.Set(s, 1, 1, Seconds(1.7 + s));
    table.Set(s, 2, 1, Seconds(1.0 + 0.5 * s));
  }
  const auto servers = DynamicPlacements(8, 8, {1, 2, 8});
  auto stream = PoissonRequests({{{"m", 64, 64, 1, 10}, 1}, {{"m", 128, 64, 1, 10}, 1}}, 2.0, Seconds(500), 9);
  QueueOptions o;
  o.policy = Policy::kDynamic;
  o.deadline = Seconds(4);
  auto run = SimulateQueue(*stream, servers, table, o);
  ASSERT_TRUE(run.ok());
  std::vector<std::vector<std::pair<double, double>>> per_gpu(8);
  for (const auto& x : run->served) {
    const Server& s = servers[x.server];
    for (int g = s.first_gpu; g < s.first_gpu + s.gpus; ++g) per_gpu[g].emplace_back(x.start.value(), x.finish.value());
  }
  for (auto& spans : per_gpu) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) ASSERT_LE(spans[i - 1].second, spans[i].first);
  }
}

TEST(QueueSimTest, RequestsOfOneShapeAreBatchedUpToTheLimit) {
  ServiceTable table(2, 1, 4);
  for (int k = 1; k <= 3; ++k) table.Set(0, 0, k, Seconds(1 + 0.5 * (k - 1)));  // batches up to 3 priced
  table.Set(1, 0, 1, Seconds(2));
  const RequestStream stream = Stream({{0, 0}, {0, 1}, {0, 0}, {0, 0}, {0, 0}}, 2);
  QueueOptions o;
  o.max_batch = 4;
  auto run = SimulateQueue(stream, {{0, 0, 1}}, table, o);
  ASSERT_TRUE(run.ok());
  // The head's shape, three at most (the largest priced batch), then the other shape, then
  // the last of the first shape.
  for (int id : {0, 2, 3}) {
    EXPECT_EQ(run->served[id].batch, 3) << id;
    EXPECT_DOUBLE_EQ(run->served[id].finish.value(), 2.0) << id;
  }
  EXPECT_DOUBLE_EQ(run->served[1].start.value(), 2.0);
  EXPECT_DOUBLE_EQ(run->served[4].start.value(), 4.0);
  EXPECT_DOUBLE_EQ(run->served[4].finish.value(), 5.0);
}

TEST(QueueSimTest, AShapeNoReplicaCanServeIsAnErrorNamingIt) {
  ServiceTable table(2, 1, 1);
  table.Set(0, 0, 1, Seconds(1));
  table.Refuse(1, 0, "ulysses=2: needs 90.0 GB per GPU of 80 GB");
  auto run = SimulateQueue(Stream({{0, 0}, {1, 1}}, 2), {{0, 0, 1}}, table, {});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("m 128x64"), std::string::npos) << run.status().message();
  EXPECT_NE(run.status().message().find("90.0 GB"), std::string::npos) << run.status().message();
}

TEST(SummaryTest, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(NearestRank(v, 0.99), 99);
  EXPECT_EQ(NearestRank(v, 0.50), 50);
  EXPECT_EQ(NearestRank(v, 1.0), 100);
  EXPECT_EQ(NearestRank({3, 1, 2}, 0.99), 3);
  EXPECT_EQ(NearestRank({3, 1, 2}, 0.334), 2);
}

TEST(RequestsTest, PoissonStreamsAreReproducibleAndHaveTheRateAndMix) {
  const std::vector<MixItem> mix = {{{"m", 64, 64, 1, 10}, 3}, {{"m", 128, 64, 1, 10}, 1}};
  auto a = PoissonRequests(mix, 5, Seconds(4000), 42);
  auto b = PoissonRequests(mix, 5, Seconds(4000), 42);
  auto c = PoissonRequests(mix, 5, Seconds(4000), 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) ASSERT_EQ(a->requests[i].arrival, b->requests[i].arrival);
  EXPECT_NE(a->requests[10].arrival, c->requests[10].arrival);
  const double n = static_cast<double>(a->requests.size());
  EXPECT_NEAR(n, 20000, 4 * std::sqrt(20000.0));
  double large = 0;
  for (const auto& r : a->requests) large += r.shape == 1;
  EXPECT_NEAR(large / n, 0.25, 0.02);
  EXPECT_NEAR(MeanRate(*a), 5, 0.2);
}

}  // namespace
}  // namespace ditune::serving
