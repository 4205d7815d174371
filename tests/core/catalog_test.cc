#include "core/catalog.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "core/workload.h"
#include "tests/core/test_catalog.h"

namespace ditune {
namespace {

using testing::TestCatalog;

const std::set<std::string> kDesignModels = {
    "pixart-alpha", "pixart-sigma", "sd3-medium", "sd3.5-large", "flux.1-dev", "flux.1-schnell",
    "hunyuandit-v1.2", "cogvideox-2b", "cogvideox-5b", "cogvideox1.5-5b", "consisid", "latte-1",
    "hunyuanvideo", "wan2.1-1.3b", "wan2.1-14b", "mochi-1", "sana-1600m", "stepvideo-t2v"};
const std::set<std::string> kDesignGpus = {
    "a100-sxm4-80gb", "a100-pcie-80gb", "h100-sxm5-80gb", "h100-pcie-80gb", "h200-sxm-141gb",
    "h20-96gb", "l40-48gb", "l40s-48gb", "l20-48gb", "rtx4090-24gb", "a10-24gb", "v100-sxm2-32gb",
    "cpu"};
const std::set<std::string> kDesignLinks = {"nvlink2", "nvlink3", "nvlink4", "pcie3", "pcie4",
                                            "pcie5", "shm", "none", "eth-25g", "eth-100g",
                                            "roce-200g", "ib-hdr", "ib-ndr"};

TEST(CatalogTest, EveryDesignIdIsShipped) {
  std::set<std::string> models, gpus, links;
  for (const auto& m : TestCatalog().models()) models.insert(m.id);
  for (const auto& g : TestCatalog().gpus()) gpus.insert(g.id);
  for (const auto& l : TestCatalog().links()) links.insert(l.id);
  for (const auto& id : kDesignModels) EXPECT_TRUE(models.count(id)) << id;
  for (const auto& id : kDesignGpus) EXPECT_TRUE(gpus.count(id)) << id;
  for (const auto& id : kDesignLinks) EXPECT_TRUE(links.count(id)) << id;
  int tiny = 0;
  for (const auto& id : models) tiny += id.rfind("tiny-", 0) == 0;
  EXPECT_GE(tiny, 3);
}

TEST(CatalogTest, ModelCrossChecks) {
  for (const auto& m : TestCatalog().models()) {
    SCOPED_TRACE(m.id);
    EXPECT_EQ(m.hidden, m.heads * m.head_dim);
    EXPECT_GT(m.num_blocks(), 0);
    EXPECT_GT(m.mlp_hidden, 0);
    EXPECT_GT(m.text_encoders.size(), 0u);
    EXPECT_GT(m.vae_decoder_flops_per_pixel, 0);
    // A real model has its published parameter count, or its notes say why the shapes'
    // count stands instead (a rounded "11B").
    if (m.id.rfind("tiny-", 0) != 0 && m.published_params == 0) {
      EXPECT_NE(m.notes.find("parameters from the shapes"), std::string::npos);
    } else if (m.id.rfind("tiny-", 0) != 0) {
      EXPECT_GT(m.published_params, 1e8);
    }
    // The default size must be a workload the model accepts.
    Workload w{m.id, m.default_height, m.default_width, m.default_frames, m.default_steps, 1,
               OutputType::kDecoded};
    EXPECT_TRUE(ComputeTokenGeometry(m, w).ok()) << ComputeTokenGeometry(m, w).status().ToString();
  }
}

TEST(CatalogTest, PublishedShapes) {
  const auto& flux = testing::TestModel("flux.1-dev");
  EXPECT_EQ(flux.num_blocks(BlockFamily::kJoint), 19);
  EXPECT_EQ(flux.num_blocks(BlockFamily::kSingle), 38);
  EXPECT_EQ(flux.family_of(18), BlockFamily::kJoint);
  EXPECT_EQ(flux.family_of(19), BlockFamily::kSingle);
  EXPECT_FALSE(flux.uses_cfg);
  EXPECT_EQ(flux.heads, 24);
  const auto& pixart = testing::TestModel("pixart-alpha");
  EXPECT_EQ(pixart.num_blocks(), 28);
  EXPECT_EQ(pixart.hidden, 1152);
  EXPECT_TRUE(pixart.uses_cfg);
  EXPECT_EQ(testing::TestModel("sana-1600m").attention, AttentionKind::kLinear);
  EXPECT_TRUE(testing::TestModel("hunyuandit-v1.2").skip_connections);
  EXPECT_EQ(testing::TestModel("mochi-1").text_stream_hidden, 1536);
}

TEST(CatalogTest, VaeDecodersAreCountedFromTheirArchitectures) {
  // The SD/Flux AutoencoderKL decoder: convolutions per pixel and a 512-channel mid-block
  // attention; Sana's DC-AE: convolutions and linear attention only.
  for (const char* id : {"pixart-alpha", "sd3-medium", "flux.1-dev", "hunyuandit-v1.2", "latte-1"}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(testing::TestModel(id).vae_decoder_flops_per_pixel, 9.46e6);
    EXPECT_EQ(testing::TestModel(id).vae_decoder_attention_channels, 512);
  }
  EXPECT_EQ(testing::TestModel("sana-1600m").vae_decoder_flops_per_pixel, 7.99e6);
  EXPECT_EQ(testing::TestModel("sana-1600m").vae_decoder_attention_channels, 0);
  // A width out of range is refused, naming the field.
  std::ifstream in(std::string(DITUNE_TEST_DATA_DIR) + "/models/pixart-alpha.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["vae"]["decoder_attention_channels"] = -1;
  auto bad = ParseModelSpec(j, "pixart-alpha.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("decoder_attention_channels"), std::string::npos) << bad.status().ToString();
}

TEST(CatalogTest, HardwareCrossChecks) {
  for (const auto& g : TestCatalog().gpus()) {
    SCOPED_TRACE(g.id);
    EXPECT_GT(g.tensor_peak().value(), 0);
    EXPECT_GT(g.memory.value(), 0);
    EXPECT_TRUE(TestCatalog().Link(g.default_intra).ok());
  }
  const GpuSpec& h100 = **TestCatalog().Gpu("h100-sxm5-80gb");
  EXPECT_DOUBLE_EQ(h100.bf16_peak.value(), 989e12);
  // nvidia-smi's memory.total where the hardware file gives it: 81559 MiB.
  EXPECT_DOUBLE_EQ(h100.memory.value(), 81559.0 * 1024 * 1024);
  const LinkSpec& pcie = **TestCatalog().Link("pcie4");
  EXPECT_EQ(pcie.topology, LinkTopology::kPcieTwoSocket);
  EXPECT_LT(pcie.cross_socket, pcie.p2p);
  EXPECT_EQ((*TestCatalog().Link("ib-ndr"))->scope, LinkScope::kInter);
}

TEST(CatalogTest, UnknownIdNamesTheClosestAndTheValidOnes) {
  auto m = TestCatalog().Model("flux-1-dev");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kNotFound);
  EXPECT_NE(m.status().message().find("did you mean 'flux.1-dev'"), std::string::npos);
  EXPECT_NE(m.status().message().find("pixart-alpha"), std::string::npos);
  auto g = TestCatalog().Gpu("b200");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("h100-sxm5-80gb"), std::string::npos);
}

class BadCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(DITUNE_TEST_TMP_DIR) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_.parent_path());
    std::filesystem::copy(DITUNE_TEST_DATA_DIR, dir_, std::filesystem::copy_options::recursive);
  }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ / rel) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(BadCatalogTest, MalformedJsonNamesTheFile) {
  Write("models/pixart-alpha.json", "{ \"id\": \"pixart-alpha\", ");
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ExitCode(), 2);
  EXPECT_NE(c.status().message().find("pixart-alpha.json"), std::string::npos);
  EXPECT_NE(c.status().message().find("malformed JSON"), std::string::npos);
}

TEST_F(BadCatalogTest, BrokenShapeIsRejected) {
  auto j = *ReadJsonFile((dir_ / "models/flux.1-dev.json").string());
  j["heads"] = 25;
  Write("models/flux.1-dev.json", j.dump());
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hidden 3072 != heads 25 x head_dim 128"), std::string::npos);
}

TEST_F(BadCatalogTest, MisspeltFieldIsRejected) {
  auto j = *ReadJsonFile((dir_ / "hardware/gpus/l40-48gb.json").string());
  j["memroy_gb"] = 48;
  Write("hardware/gpus/l40-48gb.json", j.dump());
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("unknown field 'memroy_gb'"), std::string::npos);
}

// A measured host cost names only the block families the model has, and cites its source.
TEST_F(BadCatalogTest, EagerHostOpsNameTheModelsFamilies) {
  auto good = *ReadJsonFile((dir_ / "models/flux.1-dev.json").string());
  ASSERT_TRUE(good.contains("eager_host_ops"));
  {
    auto c = Catalog::Load(dir_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const ModelSpec& m = **c->Model("flux.1-dev");
    EXPECT_EQ(m.eager_host_ops.Of(BlockFamily::kJoint), good["eager_host_ops"]["joint"].get<double>());
    EXPECT_EQ(m.eager_host_ops.Of(BlockFamily::kCross), 0);
    EXPECT_FALSE(m.eager_host_ops.source.empty());
  }
  auto j = good;
  j["eager_host_ops"]["cross"] = 50;
  Write("models/flux.1-dev.json", j.dump());
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ExitCode(), 2);
  EXPECT_NE(c.status().message().find("eager_host_ops.cross is given but the model has no cross blocks"),
            std::string::npos)
      << c.status().ToString();
  j = good;
  j["eager_host_ops"]["joint"] = 0;
  Write("models/flux.1-dev.json", j.dump());
  c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("joint"), std::string::npos) << c.status().ToString();
  j = good;
  j["eager_host_ops"].erase("source");
  Write("models/flux.1-dev.json", j.dump());
  c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("source"), std::string::npos) << c.status().ToString();
}

// A measured step host cost needs both counts, positive, and its source.
TEST_F(BadCatalogTest, StepHostOpsNeedBothCountsAndASource) {
  auto good = *ReadJsonFile((dir_ / "models/flux.1-dev.json").string());
  ASSERT_TRUE(good.contains("step_host_ops"));
  {
    auto c = Catalog::Load(dir_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const ModelSpec& m = **c->Model("flux.1-dev");
    EXPECT_EQ(m.step_host_ops.outside, good["step_host_ops"]["outside"].get<double>());
    EXPECT_EQ(m.step_host_ops.scheduler, good["step_host_ops"]["scheduler"].get<double>());
    EXPECT_FALSE(m.step_host_ops.source.empty());
  }
  for (const char* broken : {"outside", "scheduler", "source"}) {
    auto j = good;
    j["step_host_ops"].erase(broken);
    Write("models/flux.1-dev.json", j.dump());
    auto c = Catalog::Load(dir_);
    ASSERT_FALSE(c.ok()) << broken;
    EXPECT_EQ(c.status().ExitCode(), 2);
    EXPECT_NE(c.status().message().find(broken), std::string::npos) << c.status().ToString();
  }
  auto j = good;
  j["step_host_ops"]["scheduler"] = 0;
  Write("models/flux.1-dev.json", j.dump());
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("scheduler"), std::string::npos) << c.status().ToString();
  j = good;
  j["step_host_ops"]["per_patch"] = 3;
  Write("models/flux.1-dev.json", j.dump());
  c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("per_patch"), std::string::npos) << c.status().ToString();
}

TEST_F(BadCatalogTest, WrongTypeAndMissingField) {
  auto j = *ReadJsonFile((dir_ / "hardware/links/pcie4.json").string());
  j["p2p_gbps"] = "fast";
  Write("hardware/links/pcie4.json", j.dump());
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("field 'p2p_gbps' must be a number"), std::string::npos);

  j = *ReadJsonFile((dir_ / "models/sd3-medium.json").string());
  j.erase("heads");
  Write("models/sd3-medium.json", j.dump());
  Write("hardware/links/pcie4.json", ReadJsonFile(std::string(DITUNE_TEST_DATA_DIR) + "/hardware/links/pcie4.json")->dump());
  c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("missing field 'heads'"), std::string::npos);
}

TEST_F(BadCatalogTest, SwitchWidthOutOfRangeOrOnAnotherTopologyIsRejected) {
  auto j = *ReadJsonFile((dir_ / "hardware/links/pcie4.json").string());
  j["gpus_per_switch"] = 100;
  Write("hardware/links/pcie4.json", j.dump());
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ExitCode(), 2);
  EXPECT_NE(c.status().message().find("gpus_per_switch"), std::string::npos) << c.status().ToString();

  Write("hardware/links/pcie4.json", ReadJsonFile(std::string(DITUNE_TEST_DATA_DIR) + "/hardware/links/pcie4.json")->dump());
  j = *ReadJsonFile((dir_ / "hardware/links/nvlink4.json").string());
  j["gpus_per_switch"] = 2;
  Write("hardware/links/nvlink4.json", j.dump());
  c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("gpus_per_switch describes a pcie-two-socket box"), std::string::npos)
      << c.status().ToString();
}

TEST_F(BadCatalogTest, IdMustMatchFileName) {
  std::filesystem::copy_file(dir_ / "models/pixart-alpha.json", dir_ / "models/pixart-beta.json");
  auto c = Catalog::Load(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("does not match the file name"), std::string::npos);
}

TEST(CatalogLoadTest, MissingDirectory) {
  auto c = Catalog::Load("/nonexistent/ditune-data");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("DITUNE_DATA"), std::string::npos);
}

// A user catalog adds a GPU, replaces a shipped link, and is checked as the shipped one is.
class UserCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(DITUNE_TEST_TMP_DIR) / "user" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "hardware" / "gpus");
    std::filesystem::create_directories(dir_ / "hardware" / "links");
  }
  void Write(const std::string& rel, const nlohmann::json& j) { std::ofstream(dir_ / rel) << j.dump(2); }
  std::filesystem::path dir_;
};

TEST_F(UserCatalogTest, AddsAndReplaces) {
  auto gpu = *ReadJsonFile(std::string(DITUNE_TEST_DATA_DIR) + "/hardware/gpus/l40s-48gb.json");
  gpu["id"] = "my-gpu";
  gpu["memory_gb"] = 96;
  gpu["device_names"] = {"NVIDIA Example 96GB"};
  gpu.erase("memory_total_mib");
  gpu.erase("memory_total_source");
  Write("hardware/gpus/my-gpu.json", gpu);
  auto link = *ReadJsonFile(std::string(DITUNE_TEST_DATA_DIR) + "/hardware/links/pcie4.json");
  link["gpus_per_switch"] = 4;
  Write("hardware/links/pcie4.json", link);
  auto c = Catalog::Load(DITUNE_TEST_DATA_DIR, {dir_});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto g = c->Gpu("my-gpu");
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ((*g)->memory.value(), 96e9);
  EXPECT_EQ((*c->Link("pcie4"))->gpus_per_switch, 4);
  EXPECT_EQ(c->gpus().size(), TestCatalog().gpus().size() + 1);
  EXPECT_EQ(c->links().size(), TestCatalog().links().size());
  ASSERT_EQ(c->user_entries().size(), 2u);
  EXPECT_NE(c->UserFileOf("gpu", "my-gpu").find("my-gpu.json"), std::string::npos);
  EXPECT_EQ(c->UserFileOf("gpu", "h100-sxm5-80gb"), "");
  EXPECT_NE(c->fingerprint(), TestCatalog().fingerprint());
  EXPECT_EQ(Catalog::Load(DITUNE_TEST_DATA_DIR)->fingerprint(), TestCatalog().fingerprint());
}

TEST_F(UserCatalogTest, BadFilesAndDirectoriesAreErrors) {
  Write("hardware/gpus/my-gpu.json", nlohmann::json{{"id", "my-gpu"}});
  auto c = Catalog::Load(DITUNE_TEST_DATA_DIR, {dir_});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ExitCode(), 2);
  EXPECT_NE(c.status().message().find("my-gpu.json"), std::string::npos);
  auto missing = Catalog::Load(DITUNE_TEST_DATA_DIR, {dir_ / "nope"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("is not a directory"), std::string::npos);
  std::filesystem::remove_all(dir_ / "hardware");
  auto empty = Catalog::Load(DITUNE_TEST_DATA_DIR, {dir_});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds none of"), std::string::npos);
}

}  // namespace
}  // namespace ditune
