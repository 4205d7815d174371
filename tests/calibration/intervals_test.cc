#include <cmath>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "calibration/intervals.h"
#include "calibration/predict.h"

namespace ditune {
namespace {

Fit Scale(const std::string& gpu, const std::string& model, double k, bool factory) {
  Fit f;
  f.kind = kFitKindE2e;
  f.key = E2eFitKey(gpu, model);
  f.params = {{"compute_scale", k}};
  if (factory) f.params["origin"] = "learned from xdit-published-dev.csv";
  return f;
}

// Residuals e_i = ln(published / predicted) spread evenly: the band is their 10th-90th percentile.
TEST(IntervalsTest, BandsAreTheHeldOutResidualsPercentiles) {
  std::vector<Residual> rs;
  for (int i = 0; i < 21; ++i) rs.push_back({"xdit", std::exp(-0.5 + 0.05 * i), 1.0});  // e from -0.5 to 0.5
  for (int i = 0; i < 5; ++i) rs.push_back({"sglang", 2.0, 1.0});                         // too few of its own
  const std::vector<Fit> fits = {Scale("h100-sxm5-80gb", "flux.1-dev", 1.25, true),
                                 Scale("l40-48gb", "flux.1-dev", 0.8, true)};
  const IntervalTable t = LearnIntervals(rs, fits, {"cv.json"});
  ASSERT_EQ(t.bands.size(), 2u);  // "all" and "xdit"; "other" has 5 < kMinIntervalResiduals
  const IntervalBand& xdit = t.bands[1].runtime_class == "xdit" ? t.bands[1] : t.bands[0];
  EXPECT_EQ(xdit.n, 21);
  EXPECT_NEAR(xdit.lo, -0.4, 1e-9);
  EXPECT_NEAR(xdit.hi, 0.4, 1e-9);
  EXPECT_NEAR(t.scale_spread, std::log(1.25), 0.02);
  EXPECT_EQ(t.scales, 2);

  // xDiT with a published scale: the xdit band around the prediction.
  const PredictionInterval a = IntervalFor(t, "xdit", Provenance::kPublished, 10);
  EXPECT_NEAR(a.lo_s, 10 * std::exp(-0.4), 1e-9);
  EXPECT_NEAR(a.hi_s, 10 * std::exp(0.4), 1e-9);
  // Another runtime falls back to every residual and says so; no scale widens it.
  const PredictionInterval b = IntervalFor(t, "sglang", Provenance::kCatalog, 10);
  EXPECT_NE(b.basis.find("every runtime"), std::string::npos);
  EXPECT_NE(b.basis.find("widened"), std::string::npos);
  EXPECT_GT(b.hi_s / b.lo_s, a.hi_s / a.lo_s);

  auto back = IntervalTableFromJson(IntervalTableJson(t), "round-trip");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->bands.size(), t.bands.size());
  EXPECT_DOUBLE_EQ(back->scale_spread, t.scale_spread);
}

TEST(IntervalsTest, ProvenanceOfTheComputeFigure) {
  const std::vector<Fit> fits = {Scale("h100-sxm5-80gb", "flux.1-dev", 1.1, true),
                                 Scale("l40-48gb", "flux.1-dev", 0.9, false)};
  EXPECT_EQ(ComputeProvenance(fits, "h100-sxm5-80gb", "flux.1-dev"), Provenance::kPublished);
  EXPECT_EQ(ComputeProvenance(fits, "l40-48gb", "flux.1-dev"), Provenance::kMeasured);
  EXPECT_EQ(ComputeProvenance(fits, "a100-sxm4-80gb", "flux.1-dev"), Provenance::kCatalog);
}

TEST(IntervalsTest, BadDocumentsAreErrors) {
  EXPECT_FALSE(ResidualsFromValidateJson(nlohmann::json::array(), "x").ok());
  EXPECT_FALSE(ResidualsFromValidateJson(nlohmann::json{{"rows", nlohmann::json::array()}}, "x").ok());
  const nlohmann::json one = {{"rows", {{{"role", "predict"}, {"published_s", 2.0}, {"predicted_s", 1.0}}}}};
  auto r = ResidualsFromValidateJson(one, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->front().runtime, "xdit");
  EXPECT_FALSE(IntervalTableFromJson(nlohmann::json{{"about", "x"}}, "x").ok());
  nlohmann::json no_all = {{"about", "x"}, {"scale_spread", 0.1}, {"scales", 1}, {"sources", nlohmann::json::array()},
                           {"bands", {{{"runtime_class", "xdit"}, {"n", 12}, {"lo", -0.1}, {"hi", 0.1}}}}};
  EXPECT_FALSE(IntervalTableFromJson(no_all, "x").ok());
  no_all["bands"][0]["runtime_class"] = "all";
  EXPECT_TRUE(IntervalTableFromJson(no_all, "x").ok());
  no_all["bands"][0]["lo"] = 0.5;
  EXPECT_FALSE(IntervalTableFromJson(no_all, "x").ok());  // lo above hi
}

}  // namespace
}  // namespace ditune
