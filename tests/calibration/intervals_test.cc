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

// A publisher whose values sit apart from the others' is what a user's own cluster is to the
// bands: each publisher judged by the bands of the others', the bands widen about their middle
// until 80% of those values fall inside, and every interval carries that widening.
TEST(IntervalsTest, BandsWidenUntilEachPublisherIsCoveredByTheOthers) {
  std::vector<Residual> rs;
  // Two publishers centred on 0 and one skewed to +0.3, each spread over ±0.2.
  for (const auto& [pub, centre] : {std::pair{"a", 0.0}, std::pair{"b", 0.0}, std::pair{"c", 0.3}}) {
    for (int i = 0; i < 21; ++i) rs.push_back({"other", std::exp(centre - 0.2 + 0.02 * i), 1.0, pub});
  }
  const IntervalTable t = LearnIntervals(rs, {}, {"cv.json"});
  EXPECT_EQ(t.source_publishers, 3);
  EXPECT_LT(t.source_coverage_before, 0.8);
  EXPECT_GT(t.source_widening, 1.0);
  EXPECT_LE(t.source_widening, 4.0);
  // With the factor, each publisher's values judged by the others' bands: 80% inside, and at
  // one step less, fewer.
  auto covered = [&](double w) {
    int inside = 0;
    for (const char* pub : {"a", "b", "c"}) {
      std::vector<Residual> others;
      for (const auto& r : rs) {
        if (r.publisher != pub) others.push_back({r.runtime, r.published_s, r.predicted_s});
      }
      IntervalTable o = LearnIntervals(others, {}, {});
      o.source_widening = w;
      for (const auto& r : rs) {
        if (r.publisher != pub) continue;
        const PredictionInterval in = IntervalFor(o, r.runtime, Provenance::kPublished, r.predicted_s);
        inside += r.published_s >= in.lo_s * (1 - 1e-12) && r.published_s <= in.hi_s * (1 + 1e-12);
      }
    }
    return inside / static_cast<double>(rs.size());
  };
  EXPECT_GE(covered(t.source_widening), 0.8);
  EXPECT_LT(covered(std::round(100 * t.source_widening - 1) / 100), 0.8);
  const PredictionInterval p = IntervalFor(t, "other", Provenance::kPublished, 10);
  EXPECT_NE(p.basis.find("never saw"), std::string::npos) << p.basis;
  // Without publishers (a leave-one-group-out document), nothing widens.
  std::vector<Residual> anonymous;
  for (const auto& r : rs) anonymous.push_back({r.runtime, r.published_s, r.predicted_s});
  EXPECT_EQ(LearnIntervals(anonymous, {}, {}).source_widening, 1.0);
  auto back = IntervalTableFromJson(IntervalTableJson(t), "round-trip");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->source_widening, t.source_widening);
  EXPECT_EQ(back->source_publishers, 3);
}

// Each publisher counts once: two large publishers the others' bands cover and a small one
// they miss need a wider band than their rows pooled would ask for (pooled, the small table's
// misses hardly move the coverage).
TEST(IntervalsTest, EachPublisherCountsOnceInTheWidening) {
  std::vector<Residual> rs;
  for (const char* pub : {"a", "b"}) {
    for (int i = 0; i < 60; ++i) rs.push_back({"other", std::exp(-0.2 + 0.4 * i / 59.0), 1.0, pub});
  }
  for (int i = 0; i < 5; ++i) rs.push_back({"other", std::exp(0.25 + 0.05 * i), 1.0, "c"});
  const IntervalTable t = LearnIntervals(rs, {}, {"cv.json"});
  EXPECT_EQ(t.source_publishers, 3);
  // The small publisher's five values lie above the others' 90th percentile: on average over
  // the three, a third of the coverage is missing before widening.
  EXPECT_LT(t.source_coverage_before, 0.7);
  EXPECT_GT(t.source_widening, 1.3);
  // Judged as IntervalFor widens: publisher c's values inside at the factor.
  std::vector<Residual> others;
  for (const auto& r : rs) {
    if (r.publisher != "c") others.push_back({r.runtime, r.published_s, r.predicted_s});
  }
  IntervalTable o = LearnIntervals(others, {}, {});
  o.source_widening = t.source_widening;
  int inside = 0;
  for (const auto& r : rs) {
    if (r.publisher != "c") continue;
    const PredictionInterval in = IntervalFor(o, r.runtime, Provenance::kPublished, r.predicted_s);
    inside += r.published_s >= in.lo_s * (1 - 1e-12) && r.published_s <= in.hi_s * (1 + 1e-12);
  }
  EXPECT_GE(inside, 2);
}

// Peaks per GPU: the memory band is their residuals' 10th-90th percentile, read from a
// validate document's rows with both peaks, kept through the file, and absent with too few.
TEST(IntervalsTest, PeakMemoryHasItsOwnBand) {
  nlohmann::json doc = {{"rows", nlohmann::json::array()}};
  for (int i = 0; i < 21; ++i) {
    doc["rows"].push_back({{"role", i % 2 ? "predict" : "calibrate"},
                           {"published_memory_gb", 40.0 * std::exp(-0.2 + 0.02 * i)},
                           {"predicted_memory_gb", 40.0}});
  }
  doc["rows"].push_back({{"role", "predict"}, {"published_memory_gb", nullptr}, {"predicted_memory_gb", 30.0}});
  auto peaks = MemoryResidualsFromValidateJson(doc, "v.json");
  ASSERT_TRUE(peaks.ok()) << peaks.status().ToString();
  EXPECT_EQ(peaks->size(), 21u);
  const std::vector<Residual> rs(12, Residual{"xdit", 1.0, 1.0});
  const IntervalTable t = LearnIntervals(rs, {}, {"cv.json", "v.json"}, *peaks);
  ASSERT_TRUE(t.memory.has_value());
  EXPECT_EQ(t.memory->n, 21);
  EXPECT_NEAR(t.memory->lo, -0.16, 1e-9);
  EXPECT_NEAR(t.memory->hi, 0.16, 1e-9);
  const std::optional<MemoryInterval> m = MemoryIntervalFor(t, 50);
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->lo_gb, 50 * std::exp(-0.16), 1e-9);
  EXPECT_NEAR(m->hi_gb, 50 * std::exp(0.16), 1e-9);
  auto back = IntervalTableFromJson(IntervalTableJson(t), "round-trip");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->memory.has_value());
  EXPECT_DOUBLE_EQ(back->memory->hi, t.memory->hi);
  // Too few peaks: no band, and no interval.
  const IntervalTable few = LearnIntervals(rs, {}, {}, std::vector<MemoryResidual>(5, MemoryResidual{40, 40}));
  EXPECT_FALSE(few.memory.has_value());
  EXPECT_FALSE(MemoryIntervalFor(few, 50).has_value());
  EXPECT_FALSE(IntervalTableFromJson(IntervalTableJson(few), "no-memory")->memory.has_value());
  // A document without peaks is refused by name.
  nlohmann::json none = {{"rows", nlohmann::json::array({{{"role", "predict"}, {"published_s", 1.0}}})}};
  auto missing = MemoryResidualsFromValidateJson(none, "lat.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("lat.json"), std::string::npos);
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
