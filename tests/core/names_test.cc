// The names users type for models and GPUs.
#include "core/names.h"

#include <string>

#include <gtest/gtest.h>

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

std::string ModelId(const char* name) {
  auto m = FindModel(Cat(), name);
  return m.ok() ? (*m)->id : "error: " + m.status().message();
}

std::string GpuId(const char* name, std::string* note = nullptr) {
  auto g = FindGpu(Cat(), name, note);
  return g.ok() ? (*g)->id : "error: " + g.status().message();
}

TEST(NamesTest, ModelsByIdNameAndRepository) {
  EXPECT_EQ(ModelId("flux.1-dev"), "flux.1-dev");
  EXPECT_EQ(ModelId("FLUX.1-dev"), "flux.1-dev");  // what xDiT's --model takes, and ditune prints
  EXPECT_EQ(ModelId("black-forest-labs/FLUX.1-dev"), "flux.1-dev");
  EXPECT_EQ(ModelId("Stable Diffusion 3 Medium"), "sd3-medium");
  EXPECT_EQ(ModelId("stabilityai/stable-diffusion-3-medium-diffusers"), "sd3-medium");
  EXPECT_EQ(ModelId("Wan-AI/Wan2.1-T2V-14B"), "wan2.1-14b");
  // Two models cite Qwen/Qwen-Image: the one named after it.
  EXPECT_EQ(ModelId("Qwen/Qwen-Image"), "qwen-image");
  const std::string unknown = ModelId("flux.3-dev");
  EXPECT_EQ(unknown.rfind("error: ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("flux."), std::string::npos) << unknown;  // the closest ids
}

TEST(NamesTest, GpusByIdDriverNameAndShortForm) {
  EXPECT_EQ(GpuId("h100-sxm5-80gb"), "h100-sxm5-80gb");
  EXPECT_EQ(GpuId("H100-SXM5-80GB"), "h100-sxm5-80gb");
  EXPECT_EQ(GpuId("NVIDIA H100 80GB HBM3"), "h100-sxm5-80gb");
  EXPECT_EQ(GpuId("NVIDIA H100 PCIe"), "h100-pcie-80gb");
  EXPECT_EQ(GpuId("H100 PCIe"), "h100-pcie-80gb");
  EXPECT_EQ(GpuId("h200"), "h200-sxm-141gb");
  EXPECT_EQ(GpuId("H20"), "h20-96gb");  // not H200, which only starts with the same letters
  EXPECT_EQ(GpuId("RTX 4090"), "rtx4090-24gb");
  EXPECT_EQ(GpuId("L40"), "l40-48gb");
  EXPECT_EQ(GpuId("L40S"), "l40s-48gb");
  std::string note;
  EXPECT_EQ(GpuId("H100", &note), "h100-sxm5-80gb");
  EXPECT_NE(note.find("h100-pcie-80gb"), std::string::npos) << note;
  note.clear();
  EXPECT_EQ(GpuId("A100", &note), "a100-sxm4-80gb");
  EXPECT_NE(note.find("a100-pcie-80gb"), std::string::npos) << note;
  EXPECT_NE(note.find("a100-sxm4-40gb"), std::string::npos) << note;  // the 80 GB SXM part is taken
  EXPECT_EQ(GpuId("A800"), "a800-sxm4-80gb");
  EXPECT_EQ(GpuId("NVIDIA H800"), "h800-sxm5-80gb");
  EXPECT_EQ(GpuId("L4"), "l4-24gb");  // not the L40
  const std::string unknown = GpuId("B100");
  EXPECT_EQ(unknown.rfind("error: ", 0), 0u) << unknown;
}

}  // namespace
}  // namespace ditune
