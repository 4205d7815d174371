#include "core/workload.h"

#include <gtest/gtest.h>

#include "tests/core/test_catalog.h"

namespace ditune {
namespace {

using testing::TestModel;

int64_t Tokens(const std::string& model, int h, int w, int frames = 1) {
  Workload wl{model, h, w, frames, 20, 1, OutputType::kDecoded};
  auto g = ComputeTokenGeometry(TestModel(model), wl);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? g->image_tokens() : -1;
}

TEST(WorkloadTest, PublishedTokenCounts) {
  EXPECT_EQ(Tokens("pixart-alpha", 1024, 1024), 4096);
  EXPECT_EQ(Tokens("pixart-alpha", 2048, 2048), 16384);
  EXPECT_EQ(Tokens("pixart-alpha", 4096, 4096), 65536);
  EXPECT_EQ(Tokens("flux.1-dev", 1024, 1024), 4096);
  EXPECT_EQ(Tokens("cogvideox-5b", 480, 720, 49), 17550);
  EXPECT_EQ(Tokens("hunyuanvideo", 720, 1280, 129), 118800);
  EXPECT_EQ(Tokens("sana-1600m", 4096, 4096), 16384);  // DC-AE 32x, patch 1
}

TEST(WorkloadTest, Geometry) {
  Workload wl{"cogvideox-5b", 480, 720, 49, 50, 1, OutputType::kDecoded};
  auto g = *ComputeTokenGeometry(TestModel("cogvideox-5b"), wl);
  EXPECT_EQ(g.latent_frames, 13);
  EXPECT_EQ(g.patch_rows, 30);
  EXPECT_EQ(g.patch_cols, 45);
  EXPECT_EQ(g.text_tokens, 226);
}

TEST(WorkloadTest, BadSizesNameTheNearestValid) {
  Workload wl{"pixart-alpha", 1000, 1024, 1, 20, 1, OutputType::kDecoded};
  auto g = ComputeTokenGeometry(TestModel("pixart-alpha"), wl);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().ExitCode(), 2);
  EXPECT_NE(g.status().message().find("--height 1000 must be a positive multiple of 16"), std::string::npos);
  EXPECT_NE(g.status().message().find("nearest valid: 992, 1008"), std::string::npos);

  wl = {"cogvideox-5b", 480, 720, 50, 50, 1, OutputType::kDecoded};
  g = ComputeTokenGeometry(TestModel("cogvideox-5b"), wl);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nearest valid: 49, 53"), std::string::npos);

  wl = {"flux.1-dev", 1024, 1024, 16, 28, 1, OutputType::kDecoded};
  EXPECT_FALSE(ComputeTokenGeometry(TestModel("flux.1-dev"), wl).ok());
  wl = {"flux.1-dev", 1024, 1024, 1, 0, 1, OutputType::kDecoded};
  EXPECT_FALSE(ComputeTokenGeometry(TestModel("flux.1-dev"), wl).ok());
}

}  // namespace
}  // namespace ditune
