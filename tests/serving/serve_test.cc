// Layouts, request inputs, service pricing and the layout search of `ditune serve`.
#include <gtest/gtest.h>

#include "planner/plan.h"
#include "serving/layout.h"
#include "serving/requests.h"
#include "serving/serve.h"
#include "serving/service.h"

namespace ditune::serving {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

TEST(LayoutTest, ParsesCountsAndConfigurationsAndPrintsThemBack) {
  auto a = ParseLayout("4x(ulysses=2)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->groups.size(), 1u);
  EXPECT_EQ(a->groups[0].count, 4);
  EXPECT_EQ(a->gpus(), 8);
  auto b = ParseLayout("2x(ulysses=2)+4x()");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->gpus(), 8);
  EXPECT_EQ(b->replicas(), 6);
  EXPECT_EQ(ToString(*b), "2x(ulysses=2)+4x()");
  auto c = ParseLayout("(ring=2,pipefusion=2) + 2x(--ulysses_degree 2)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->groups[0].count, 1);
  EXPECT_EQ(c->gpus(), 8);
  auto again = ParseLayout(ToString(*c));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ToString(*again), ToString(*c));
}

TEST(LayoutTest, BadLayoutsNameThePartAndTheForm) {
  for (const char* bad : {"", "4x", "4(ulysses=2)", "0x()", "2x(ulysses=0)", "2x()+", "2x() 3x()", "x()"}) {
    auto l = ParseLayout(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_EQ(l.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(l.status().message().find("COUNTx(CONFIG)"), std::string::npos) << l.status().message();
  }
}

TEST(LayoutTest, ALayoutOfMoreGpusThanAnIntHoldsIsRefused) {
  auto l = ParseLayout("65536x(ulysses=1024,ring=1024)");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("more than 65536 GPUs"), std::string::npos) << l.status().message();
}

TEST(LayoutTest, PlacesReplicasInsideNodesLargestFirst) {
  const Cluster two_nodes = *ResolveCluster({"h100-sxm5-80gb", 16, 8, 2, "", "ib-ndr"}, Cat());
  auto placed = PlaceLayout(*ParseLayout("4x()+1x(ulysses=8)+2x(ulysses=2)"), two_nodes);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  ASSERT_EQ(placed->size(), 7u);
  EXPECT_EQ((*placed)[4].gpus, 8);  // in the layout's order
  EXPECT_EQ((*placed)[4].first_gpu, 0);
  EXPECT_EQ((*placed)[5].first_gpu, 8);
  EXPECT_EQ((*placed)[6].first_gpu, 10);
  EXPECT_EQ((*placed)[0].first_gpu, 12);
  EXPECT_EQ((*placed)[3].first_gpu, 15);
  EXPECT_FALSE(PlaceLayout(*ParseLayout("9x(ulysses=2)"), two_nodes).ok());  // 18 GPUs
  auto odd = PlaceLayout(*ParseLayout("1x(ulysses=4,ring=3)"), two_nodes);  // 12 GPUs on nodes of 8
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("whole number of nodes"), std::string::npos) << odd.status().message();
  auto split = PlaceLayout(*ParseLayout("2x(ring=6)+1x(ring=3)"), two_nodes);  // 15 GPUs, but 2 free per node
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("no room"), std::string::npos) << split.status().message();
  const ClusterSpec one = ReplicaClusterSpec(two_nodes, 4);
  EXPECT_EQ(one.nodes, 1);
  EXPECT_EQ(one.inter_id, "none");
  const ClusterSpec both = ReplicaClusterSpec(two_nodes, 16);
  EXPECT_EQ(both.nodes, 2);
  EXPECT_EQ(both.inter_id, "ib-ndr");
}

TEST(RequestsTest, MixItemsTakeTheRestOfTheirShapeFromTheBase) {
  const RequestShape base{"cogvideox-5b", 480, 720, 49, 50};
  auto mix = ParseMix("480x720:3, 768x1360x81@30:1,480x720x17", base);
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  ASSERT_EQ(mix->size(), 3u);
  EXPECT_EQ((*mix)[0].shape, base);
  EXPECT_EQ((*mix)[0].weight, 3);
  EXPECT_EQ((*mix)[1].shape, (RequestShape{"cogvideox-5b", 768, 1360, 81, 30}));
  EXPECT_EQ((*mix)[2].shape.frames, 17);
  EXPECT_EQ((*mix)[2].weight, 1);
  for (const char* bad : {"1024", "1024x:1", "1024x1024:0", "1024x1024@0", "1024x1024,", "axb"}) {
    auto m = ParseMix(bad, base);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("HxW[xFRAMES]"), std::string::npos) << m.status().message();
  }
}

TEST(RequestsTest, ATraceFillsMissingColumnsAndSortsByArrival) {
  const RequestShape defaults{"flux.1-dev", 1024, 1024, 1, 28};
  auto s = ReadRequestTrace("arrival_s,width\n2.5,2048\n0.5,\n0.5,512\n", "t.csv", defaults, Cat());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->requests.size(), 3u);
  EXPECT_EQ(s->requests[0].arrival.value(), 0.5);
  EXPECT_EQ(s->shapes[s->requests[0].shape].width, 1024);  // the empty cell, first of the two at 0.5
  EXPECT_EQ(s->shapes[s->requests[1].shape].width, 512);
  EXPECT_EQ(s->shapes[s->requests[2].shape].width, 2048);
  EXPECT_EQ(s->shapes[s->requests[2].shape].height, 1024);
  EXPECT_EQ(s->shapes.size(), 3u);
  EXPECT_DOUBLE_EQ(MeanRate(*s), 1.0);
}

TEST(RequestsTest, BadTracesNameTheLineAndColumn) {
  const RequestShape defaults{"flux.1-dev", 1024, 1024, 1, 28};
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"height,width\n1024,1024\n", "no arrival_s column"},
      {"arrival_s\n-1\n", "t.csv:2: arrival_s '-1'"},
      {"arrival_s,model\n0,flux.1-dev\n1,nosuch\n", "t.csv:3:"},
      {"arrival_s,height\n0,1000\n", "t.csv:2:"},
      {"arrival_s,steps\n0,many\n", "steps 'many' is not an integer"},
      {"arrival_s\n", "no requests"},
      {"arrival_s\n1e300\n", "t.csv:2: arrival_s '1e300' is not a number of seconds from 0 to 1e+08"},
      {"arrival_s,heigth\n0,1024\n", "t.csv:1: unknown column 'heigth'; a trace's columns are arrival_s,model"},
      {"arrival_s,width,width\n0,1024,512\n", "t.csv:1: column 'width' is named twice"},
      {"", "empty"},
  };
  for (const auto& c : cases) {
    auto s = ReadRequestTrace(c.text, "t.csv", defaults, Cat());
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << c.text;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

PricingContext Pricing(const Cluster& cluster) {
  static const std::vector<Fit> no_fits;
  PricingContext p;
  p.catalog = &Cat();
  p.fits = &no_fits;
  p.cluster = cluster;
  auto m = Cat().Model("flux.1-dev");
  p.base = Workload{"flux.1-dev", 1024, 1024, 1, (*m)->default_steps};
  return p;
}

TEST(ServiceTest, ServiceTimesAreThePlannersPricesAndRefusalsSayWhy) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  const PricingContext p = Pricing(cluster);
  const std::vector<RequestShape> shapes = {ShapeOf(p.base), {"flux.1-dev", 2048, 2048, 1, p.base.steps}};
  const std::vector<ParallelConfig> types = {*ParseParallelConfig(""), *ParseParallelConfig("ulysses=2"),
                                             *ParseParallelConfig("ulysses=5")};
  auto table = PriceServiceTimes(p, shapes, types, 2);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  // The same figure `ditune plan` gives the configuration on a cluster of its size.
  const Cluster two = *ResolveCluster({"h100-sxm5-80gb", 2}, Cat());
  auto priced = PriceConfigs(Cat(), p.base, two, {}, p.plan, {types[1]});
  ASSERT_TRUE(priced.ok() && (*priced)[0].ok());
  EXPECT_DOUBLE_EQ(table->Time(0, 1).value(), (*priced)[0]->result.total.value());
  EXPECT_GT(table->Time(1, 0).value(), 3 * table->Time(0, 0).value());  // 4x the tokens
  EXPECT_GT(table->Time(0, 0, 2).value(), table->Time(0, 0, 1).value());  // a batch of two takes longer
  EXPECT_FALSE(table->CanServe(0, 2));
  EXPECT_NE(table->Why(0, 2).find("ulysses=5"), std::string::npos) << table->Why(0, 2);
}

TEST(ServiceTest, AConfigurationThatDoesNotFitIsRefusedWithItsMemory) {
  const Cluster cluster = *ResolveCluster({"rtx4090-24gb", 8}, Cat());
  const PricingContext p = Pricing(cluster);
  auto table = PriceServiceTimes(p, {ShapeOf(p.base)}, {*ParseParallelConfig("")}, 1);
  ASSERT_TRUE(table.ok());
  EXPECT_FALSE(table->CanServe(0, 0));
  EXPECT_NE(table->Why(0, 0).find("GB per GPU of 26 GB"), std::string::npos) << table->Why(0, 0);  // 24564 MiB
}

ServeQuery Query(const Cluster& cluster, double rate, double duration, std::optional<double> slo) {
  ServeQuery q;
  q.pricing = Pricing(cluster);
  q.source.mix = {{ShapeOf(q.pricing.base), 1}};
  q.source.rate_rps = rate;
  q.source.duration = Seconds(duration);
  q.source.seed = 1;
  if (slo) q.slo = Seconds(*slo);
  return q;
}

TEST(ServeTest, TheSearchAnswersTheFewestGpusThatMeetTheSlo) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 16, 8, 2, "", "ib-ndr"}, Cat());
  const ServeQuery q = Query(cluster, 1.0, 1200, 9.0);
  auto a = SearchLayouts(q);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a->best) << a->why_none;
  const Evaluation& best = *a->best;
  EXPECT_TRUE(best.summary.meets_slo());
  EXPECT_LE(best.summary.at_percentile.value(), 9.0);
  ASSERT_TRUE(a->best_max_rate_rps);
  EXPECT_GE(*a->best_max_rate_rps, 0.99 * 1.0);  // it holds the asked rate
  EXPECT_LT(*a->best_max_rate_rps, best.summary.capacity_rps);
  ASSERT_FALSE(a->finalists.empty());
  EXPECT_EQ(a->finalists[0].layout, best.layout);
  for (const auto& f : a->finalists) EXPECT_EQ(f.gpus, best.gpus);
  // No single-size layout of fewer GPUs meets it.
  for (const auto& c : a->size_configs) {
    const int d = c.world_size();
    for (int k = 1; k * d < best.gpus; ++k) {
      Layout l;
      l.groups.push_back({k, c});
      auto e = ServeLayout(q, l);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      EXPECT_FALSE(e->summary.meets_slo()) << ToString(l) << " with " << best.gpus << " GPUs found";
    }
  }
}

TEST(ServeTest, AnSloFasterThanAnyServiceIsAnsweredWithTheReason) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  auto a = SearchLayouts(Query(cluster, 0.5, 600, 0.5));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->best);
  EXPECT_NE(a->why_none.find("without any queueing"), std::string::npos) << a->why_none;
}

TEST(ServeTest, ATraceServedFasterIsTheSameTraceCompressed) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  ServeQuery q = Query(cluster, 0, 0, std::nullopt);
  auto trace = ReadRequestTrace("arrival_s\n0\n10\n30\n", "t.csv", ShapeOf(q.pricing.base), Cat());
  ASSERT_TRUE(trace.ok());
  q.source.rate_rps = MeanRate(*trace);
  q.source.trace = *trace;
  auto twice = StreamAt(q.source, 2 * q.source.rate_rps);
  ASSERT_TRUE(twice.ok());
  EXPECT_DOUBLE_EQ(twice->requests[2].arrival.value(), 15.0);
  auto e = ServeLayout(q, *ParseLayout("1x()"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->run.served[1].start.value(), 10.0);
}

}  // namespace
}  // namespace ditune::serving
