#include "core/cluster.h"

#include <gtest/gtest.h>

#include "tests/core/test_catalog.h"

namespace ditune {
namespace {

using testing::TestCatalog;

TEST(ClusterTest, DefaultsFromTheGpu) {
  auto c = ResolveCluster({"l40-48gb", 8}, TestCatalog());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes(), 1);
  EXPECT_EQ(c->gpus_per_node(), 8);
  EXPECT_EQ(c->spec.intra_id, "pcie4");
  EXPECT_EQ(c->spec.inter_id, "none");
}

TEST(ClusterTest, MultiNode) {
  auto c = ResolveCluster({"l40-48gb", 12, 0, 2, "", "eth-100g"}, TestCatalog());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gpus_per_node(), 6);
  EXPECT_EQ(c->NodeOf(5), 0);
  EXPECT_EQ(c->NodeOf(6), 1);
  auto bad = ResolveCluster({"h100-sxm5-80gb", 16}, TestCatalog());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("need an inter-node link"), std::string::npos);
  EXPECT_NE(bad.status().message().find("ib-ndr"), std::string::npos);
}

TEST(ClusterTest, Errors) {
  EXPECT_FALSE(ResolveCluster({"h100-sxm5-80gb", 0}, TestCatalog()).ok());
  EXPECT_FALSE(ResolveCluster({"h100-sxm5-80gb", 7, 4}, TestCatalog()).ok());  // partial node
  auto swapped = ResolveCluster({"h100-sxm5-80gb", 8, 0, 0, "ib-ndr"}, TestCatalog());
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("that is an inter-node link"), std::string::npos);
  auto unknown = ResolveCluster({"h100", 8}, TestCatalog());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().ExitCode(), 2);
}

}  // namespace
}  // namespace ditune
