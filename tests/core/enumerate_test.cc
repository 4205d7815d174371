// The configuration space: every valid configuration of a workload on a cluster, and nothing else.
#include "core/enumerate.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "core/workload.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

ValidationContext Ctx(const char* model, int h, int w, int gpus, int batch = 1) {
  const ModelSpec* m = *Cat().Model(model);
  Workload wl{model, h, w, 1, 20, batch, OutputType::kDecoded};
  return {m, *ComputeTokenGeometry(*m, wl), 20, batch, gpus};
}

TEST(EnumerateTest, FactorisationCountMatchesBruteForce) {
  for (int n : {1, 2, 3, 4, 6, 8, 12}) {
    long brute = 0;
    for (int a = 1; a <= n; ++a)
      for (int b = 1; b <= n; ++b)
        for (int c = 1; c <= n; ++c)
          for (int d = 1; d <= n; ++d)
            for (int e = 1; e <= n; ++e)
              for (int f = 1; f <= n; ++f) brute += a * b * c * d * e * f == n;
    EXPECT_EQ(CountFactorisations(n), brute) << n;
  }
}

TEST(EnumerateTest, EveryValidConfigAndNothingElse) {
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  for (int n : {1, 2, 3, 4, 6, 8}) {
    auto ctx = Ctx("pixart-alpha", 1536, 1536, n, 2);  // 96 patch rows: divisible by 1, 2, 3, 4, 6, 8
    EnumerateOptions opt;
    opt.vary_patches = false;
    opt.vary_order = false;
    opt.distrifusion = false;
    auto configs = EnumerateConfigs(ctx, cluster, opt);
    // Brute force over every tuple of degrees with product n.
    std::set<std::string> expected;
    for (int dp = 1; dp <= n; ++dp)
      for (int cfg = 1; cfg <= n; ++cfg)
        for (int pp = 1; pp <= n; ++pp)
          for (int u = 1; u <= n; ++u)
            for (int r = 1; r <= n; ++r)
              for (int tp = 1; tp <= n; ++tp) {
                if (dp * cfg * pp * u * r * tp != n) continue;
                ParallelConfig c;
                c.dp = dp, c.cfg = cfg, c.pipefusion = pp, c.patches = pp, c.ulysses = u, c.ring = r, c.tp = tp;
                if (IsValidConfig(ctx, c)) expected.insert(ToString(c));
              }
    std::set<std::string> got;
    for (const auto& c : configs) {
      EXPECT_TRUE(IsValidConfig(ctx, c)) << ToString(c);
      EXPECT_TRUE(got.insert(ToString(c)).second) << "duplicate " << ToString(c);
    }
    EXPECT_EQ(got, expected) << n;
    EXPECT_FALSE(expected.empty());
  }
}

TEST(EnumerateTest, NonPowersOfTwoAndVariants) {
  const Cluster l40 = *ResolveCluster({"l40-48gb", 6}, Cat());
  const ModelSpec* m = *Cat().Model("cogvideox-5b");
  Workload wl{"cogvideox-5b", 480, 720, 49, 50, 1, OutputType::kLatent};
  ValidationContext ctx{m, *ComputeTokenGeometry(*m, wl), 50, 1, 6};
  std::set<std::string> got;
  for (const auto& c : EnumerateConfigs(ctx, l40)) {
    EXPECT_TRUE(IsValidConfig(ctx, c));
    got.insert(ToString(c));
  }
  for (const char* c : {"ulysses=3,ring=2", "ulysses=2,ring=3", "ulysses=3,cfg=2", "ring=3,cfg=2", "ulysses=6"}) {
    EXPECT_TRUE(got.count(c)) << c;
  }
  // A PCIe box: rank orders that keep the all-to-alls inside a socket are tried too.
  bool reordered = false;
  for (const auto& s : got) reordered |= s.find("order=") != std::string::npos;
  EXPECT_TRUE(reordered);
  // PipeFusion patch counts beyond the stage count, and DistriFusion.
  auto px = Ctx("pixart-alpha", 1024, 1024, 4);
  const Cluster h100 = *ResolveCluster({"h100-sxm5-80gb", 4}, Cat());
  std::set<std::string> p;
  for (const auto& c : EnumerateConfigs(px, h100)) p.insert(ToString(c));
  EXPECT_TRUE(p.count("pipefusion=4"));
  EXPECT_TRUE(p.count("pipefusion=4,patches=8"));
  EXPECT_TRUE(p.count("pipefusion=2,patches=1,cfg=2"));
  EXPECT_TRUE(p.count("distrifusion=4"));
}

}  // namespace
}  // namespace ditune
