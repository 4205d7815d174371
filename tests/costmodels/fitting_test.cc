#include "costmodels/fitting.h"

#include <sys/resource.h>

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace ditune {
namespace {

std::vector<FitPoint> Synthetic(double latency, double rate, double lo, double hi, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, noise);
  std::vector<FitPoint> pts;
  for (double x = lo; x <= hi; x *= 2) pts.push_back({x, (latency + x / rate) * (1 + n(rng))});
  return pts;
}

TEST(FittingTest, RecoversLatencyAndBandwidthWithinOnePercent) {
  // 30 us + bytes / 350 GB/s over 1 KB .. 64 MB, 0.2% noise.
  auto pts = Synthetic(30e-6, 350e9, 1024, 64e6, 0.002, 1);
  auto fit = FitLatencyRate(pts);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->latency_s, 30e-6, 0.3e-6);
  EXPECT_NEAR(fit->rate, 350e9, 3.5e9);
  auto pw = FitPiecewiseLatency(pts);
  ASSERT_TRUE(pw.ok());
  EXPECT_EQ(pw->model.segments().size(), 1u);  // no switch: one range
  EXPECT_NEAR(pw->model.segments()[0].rate, 350e9, 3.5e9);
  EXPECT_LT(pw->mape, 0.01);
}

TEST(FittingTest, RobustToAnOutlier) {
  auto pts = Synthetic(10e-6, 20e9, 4096, 64e6, 0.0, 2);
  pts[5].t *= 3;  // one disturbed run
  auto fit = FitLatencyRate(pts);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->rate, 20e9, 0.2e9);
  EXPECT_NEAR(fit->latency_s, 10e-6, 0.1e-6);
}

TEST(FittingTest, PiecewiseFollowsAProtocolSwitch) {
  // Below 128 KB: 5 us + x / 60 GB/s (LL protocol); above: 25 us + x / 300 GB/s (Simple).
  std::vector<FitPoint> pts;
  for (double x = 1024; x < 131072; x *= 2) pts.push_back({x, 5e-6 + x / 60e9});
  for (double x = 131072; x <= 256e6; x *= 2) pts.push_back({x, 25e-6 + x / 300e9});
  auto pw = FitPiecewiseLatency(pts);
  ASSERT_TRUE(pw.ok());
  const auto& segs = pw->model.segments();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_DOUBLE_EQ(segs[1].x_lo, 131072);
  EXPECT_NEAR(segs[0].latency_s, 5e-6, 0.05e-6);
  EXPECT_NEAR(segs[0].rate, 60e9, 0.6e9);
  EXPECT_NEAR(segs[1].latency_s, 25e-6, 0.25e-6);
  EXPECT_NEAR(segs[1].rate, 300e9, 3e9);
  EXPECT_LT(pw->mape, 0.001);
  EXPECT_LE(segs[0].rate, segs[1].rate);
}

TEST(FittingTest, RatesNeverDecreaseWithSize) {
  // A slower large-message regime (e.g. a saturated switch) is merged, not kept.
  std::vector<FitPoint> pts;
  for (double x = 1024; x < 1e6; x *= 2) pts.push_back({x, 5e-6 + x / 100e9});
  for (double x = 1 << 20; x <= 256e6; x *= 2) pts.push_back({x, 5e-6 + x / 50e9});
  auto pw = FitPiecewiseLatency(pts);
  ASSERT_TRUE(pw.ok());
  const auto& segs = pw->model.segments();
  for (size_t i = 0; i + 1 < segs.size(); ++i) EXPECT_LE(segs[i].rate, segs[i + 1].rate);
}

TEST(FittingTest, AHundredThousandPointsFitTheirTwoRegimes) {
  // A sweep ingested from many runs: log-uniform sizes over 1 KiB .. 256 MiB, two regimes
  // (5 us + x / 60 GB/s below 128 KiB, 25 us + x / 300 GB/s above), 1% noise, 1% of the
  // runs disturbed (3x slower). The fit is O(n log n): no timing asserted, it must finish.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> log2_size(10, 28);
  std::normal_distribution<double> noise(0.0, 0.01);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<FitPoint> pts;
  for (int i = 0; i < 100'000; ++i) {
    const double x = std::exp2(log2_size(rng));
    double t = (x < 131072 ? 5e-6 + x / 60e9 : 25e-6 + x / 300e9) * (1 + noise(rng));
    if (u(rng) < 0.01) t *= 3;
    pts.push_back({x, t});
  }
  auto pw = FitPiecewiseLatency(pts);
  ASSERT_TRUE(pw.ok()) << pw.status().ToString();
  EXPECT_EQ(pw->points, 100'000);
  const auto& segs = pw->model.segments();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_NEAR(segs[1].x_lo / 131072, 1.0, 0.02);
  EXPECT_NEAR(segs[0].latency_s / 5e-6, 1.0, 0.03);
  EXPECT_NEAR(segs[0].rate / 60e9, 1.0, 0.03);
  EXPECT_NEAR(segs[1].latency_s / 25e-6, 1.0, 0.03);
  EXPECT_NEAR(segs[1].rate / 300e9, 1.0, 0.03);
  EXPECT_LT(pw->mape, 0.05);  // 1% noise, and the disturbed runs at 200% each

  // Memory stays linear: the peak resident set of this whole test process (bench_fitting
  // reports the fit's own, about 20 MB at 100,000 points; the cubic fit needed gigabytes).
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, 512 * 1024) << "peak RSS in KiB";
}

TEST(FittingTest, PointsThatOverflowTheSumsAreRefusedByName) {
  std::vector<FitPoint> pts = Synthetic(10e-6, 20e9, 4096, 64e6, 0.0, 3);
  pts.push_back({1e12, 1e-200});  // 1e212 FLOP/s: its square overflows a double
  auto pw = FitPiecewiseLatency(pts);
  ASSERT_FALSE(pw.ok());
  EXPECT_EQ(pw.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(pw.status().message().find("1e-200"), std::string::npos) << pw.status().message();
  EXPECT_FALSE(FitLatencyRate(pts).ok());
}

TEST(FittingTest, JsonRoundTripAndErrors) {
  PiecewiseLatencyModel m({{1, 100, 1e-6, 1e9}, {100, 1e6, 2e-6, 2e9}});
  auto back = PiecewiseLatencyModel::FromJson(m.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->TimeAt(50), m.TimeAt(50));
  EXPECT_DOUBLE_EQ(back->TimeAt(5000), m.TimeAt(5000));
  EXPECT_FALSE(PiecewiseLatencyModel::FromJson(nlohmann::json::array()).ok());
  EXPECT_FALSE(FitLatencyRate({{1, 1}}).ok());
  EXPECT_FALSE(FitLatencyRate({{1, 1}, {2, -1}}).ok());
  EXPECT_NEAR(*FitScale({1, 2, 3}, {2, 4, 6.6}), 2.0, 1e-12);
  EXPECT_NEAR(MeanAbsolutePercentageError({1.1, 0.9}, {1, 1}), 0.1, 1e-12);
}

}  // namespace
}  // namespace ditune
