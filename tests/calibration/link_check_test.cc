#include "calibration/link_check.h"

#include <gtest/gtest.h>

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

// An nccl-tests row: `busbw_gbps` at `bytes` per rank over `ranks`, as the parser stores it
// (time = bytes x bus factor / busbw).
Measurement Row(const char* op, const char* link, int ranks, double bytes, double busbw_gbps, double factor) {
  Measurement m;
  m.kind = MeasurementKind::kCollective;
  m.op = op;
  m.backend = "nccl";
  m.device = "a100-sxm4-80gb";
  m.link = link;
  m.ranks = ranks;
  m.bytes = Bytes(bytes);
  m.median = m.p10 = m.p90 = Seconds(bytes * factor / (busbw_gbps * 1e9));
  return m;
}

// A DGX A100's all_reduce on 4 GPUs, with and without NCCL's peer-to-peer path
// (eugenesiow/LLM-Insights infrastructure/hardware/README.md, "NVSwitch": 222 GB/s average
// bus bandwidth, and 5.2 GB/s with NCCL_P2P_DISABLE=1).
TEST(LinkCheckTest, P2pDisabledOnNvlinkIsNamed) {
  const double factor = 2.0 * 3 / 4;  // all_reduce on 4 ranks
  const double gib = 1024.0 * 1024 * 1024;
  std::vector<Measurement> healthy = {Row("all_reduce", "nvlink3", 4, gib, 222, factor),
                                      Row("all_reduce", "nvlink3", 4, 0.5 * gib, 220, factor)};
  EXPECT_TRUE(FindLinkShortfalls(healthy, Cat()).empty());
  std::vector<Measurement> off = {Row("all_reduce", "nvlink3", 4, 0.5 * gib, 5.3, factor),
                                  Row("all_reduce", "nvlink3", 4, gib, 5.2, factor)};
  const auto found = FindLinkShortfalls(off, Cat());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NEAR(found[0].measured_gbps, 5.2, 1e-9);  // judged by its largest message
  EXPECT_EQ(found[0].ranks, 4);
  const std::string text = LinkShortfallText(found[0]);
  EXPECT_NE(text.find("NCCL_P2P_DISABLE=1"), std::string::npos) << text;
  EXPECT_NE(text.find("all_reduce over nvlink3 (4 ranks): 5.2 GB/s"), std::string::npos) << text;
}

// PCIe boxes name peer-to-peer, sockets and the slot; networks name the socket fallback.
// Small messages, latency-bound everywhere, are not judged.
TEST(LinkCheckTest, CausesFollowTheLinkAndSmallMessagesAreNotJudged) {
  const auto pcie = FindLinkShortfalls({Row("all_to_all", "pcie4", 4, 128e6, 2, 0.75)}, Cat());
  ASSERT_EQ(pcie.size(), 1u);
  EXPECT_NE(LinkShortfallText(pcie[0]).find("iommu=pt"), std::string::npos);
  EXPECT_NE(LinkShortfallText(pcie[0]).find("straddle the two sockets"), std::string::npos);
  const auto net = FindLinkShortfalls({Row("all_gather", "ib-ndr", 16, 1e9, 1.0, 15.0 / 16)}, Cat());
  ASSERT_EQ(net.size(), 1u);
  EXPECT_NE(LinkShortfallText(net[0]).find("NET/Socket"), std::string::npos);
  EXPECT_TRUE(FindLinkShortfalls({Row("all_reduce", "nvlink4", 8, 1e6, 2, 1.75)}, Cat()).empty());
}

}  // namespace
}  // namespace ditune
