// The doctor against public cases, each as its thread concluded (tests/data/doctor/SOURCES.md).
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "calibration/factory.h"
#include "ingest/nvidia_smi.h"
#include "planner/doctor.h"
#include "tests/core/test_catalog.h"
#include "tests/core/test_inputs.h"

namespace ditune {
namespace {

using testing::TestCatalog;

using testing::Input;

const std::vector<Fit>& Factory() {
  static const std::vector<Fit> fits = [] {
    auto f = LoadFactoryFits(TestCatalog());
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : std::vector<Fit>{};
  }();
  return fits;
}

DoctorReport Diagnose(const DoctorInputs& in) {
  auto r = RunDoctor(TestCatalog(), Factory(), in);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : DoctorReport{};
}

const Finding* Find(const DoctorReport& r, Severity s, const std::string& subject_part) {
  for (const auto& f : r.findings) {
    if (f.severity == s && f.subject.find(subject_part) != std::string::npos) return &f;
  }
  return nullptr;
}

bool AnyCause(const Finding& f, const std::string& part) {
  for (const auto& c : f.causes) {
    if (c.find(part) != std::string::npos) return true;
  }
  return false;
}

// A DGX A100's all_reduce with P2P on and off on the same box: the first healthy, the second
// a warning naming NCCL's P2P path, with what it costs a Ulysses plan.
TEST(DoctorTest, DgxA100P2pOffIsNamedAndPriced) {
  DoctorInputs in;
  in.gpu_id = "a100-sxm4-80gb";
  in.nccl_tests = {{"all_reduce_perf.dgx-a100-4gpu-p2p-on.txt", Input("all_reduce_perf.dgx-a100-4gpu-p2p-on.txt")},
                   {"all_reduce_perf.dgx-a100-4gpu-p2p-off.txt", Input("all_reduce_perf.dgx-a100-4gpu-p2p-off.txt")}};
  const DoctorReport r = Diagnose(in);
  ASSERT_EQ(r.measured.size(), 2u);
  EXPECT_EQ(r.warnings(), 1);
  const Finding* off = Find(r, Severity::kWarning, "all_reduce");
  ASSERT_NE(off, nullptr);
  EXPECT_NE(off->text.find("p2p-off"), std::string::npos);
  EXPECT_TRUE(AnyCause(*off, "NCCL_P2P_DISABLE"));
  EXPECT_NE(off->cost.find("Ulysses-4"), std::string::npos);
  EXPECT_NE(off->cost.find("instead of"), std::string::npos);
  const Finding* on = Find(r, Severity::kOk, "all_reduce");
  ASSERT_NE(on, nullptr);
  EXPECT_NE(on->text.find("p2p-on"), std::string::npos);
  for (const auto& m : r.measured) {
    if (m.origin.find("p2p-on") != std::string::npos) EXPECT_GT(m.measured_gbps / m.expected_gbps, kDoctorNoteFraction);
    if (m.origin.find("p2p-off") != std::string::npos) EXPECT_LT(m.measured_gbps / m.expected_gbps, kDoctorWarnFraction);
  }
}

// The same on a DGX H100: 370 GB/s healthy, 20-24 GB/s without P2P.
TEST(DoctorTest, DgxH100P2pOffIsAWarning) {
  DoctorInputs in;
  in.gpu_id = "h100-sxm5-80gb";
  in.nccl_tests = {{"all_reduce_perf.dgx-h100-4gpu-p2p-on.txt", Input("all_reduce_perf.dgx-h100-4gpu-p2p-on.txt")}};
  EXPECT_EQ(Diagnose(in).warnings(), 0);
  in.nccl_tests = {{"all_reduce_perf.dgx-h100-4gpu-p2p-off.txt", Input("all_reduce_perf.dgx-h100-4gpu-p2p-off.txt")}};
  EXPECT_EQ(Diagnose(in).warnings(), 1);
}

// xDiT #526: Ulysses-2 on 2 A800s, 1.6x with NCCL_P2P_DISABLE=1, 1.9x without. Only the
// environment is known; the doctor names it and prices the slower plan as slower.
TEST(DoctorTest, XditP2pDisabledEnvironment) {
  DoctorInputs in;
  in.gpu_id = "a800-sxm4-80gb";
  in.env = ParseNcclEnvironment(Input("env.p2p-disabled.txt"));
  in.env_origin = "env.p2p-disabled.txt";
  ASSERT_EQ(in.env.count("PATH"), 0u);
  const DoctorReport r = Diagnose(in);
  const Finding* f = Find(r, Severity::kWarning, "NCCL_P2P_DISABLE");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->cost.find("Ulysses-2"), std::string::npos);
  // "a.bcx instead of d.efx": the first (as measured) below the second (as priced).
  const size_t at = f->cost.find(": ");
  const double slow = std::stod(f->cost.substr(at + 2));
  const double fast = std::stod(f->cost.substr(f->cost.find("instead of ") + 11));
  EXPECT_LT(slow, fast);
  in.env = {{"NCCL_P2P_DISABLE", "0"}};
  EXPECT_EQ(Diagnose(in).warnings(), 0);
}

// NVIDIA/nccl #1603: 4 RTX 4090s' alltoall 18 GB/s through host memory, 2 GB/s with P2P forced
// across the CPUs. The first is healthy; the second names forced P2P.
TEST(DoctorTest, ForcedP2pAcrossCpusOnGeForce) {
  DoctorInputs in;
  in.gpu_id = "rtx4090-24gb";
  in.nccl_tests = {{"alltoall_perf.4x4090-shm.txt", Input("alltoall_perf.4x4090-shm.txt")}};
  EXPECT_EQ(Diagnose(in).warnings(), 0);
  in.nccl_tests = {{"alltoall_perf.4x4090-p2p-forced.txt", Input("alltoall_perf.4x4090-p2p-forced.txt")}};
  in.env = {{"NCCL_P2P_LEVEL", "SYS"}};
  const DoctorReport r = Diagnose(in);
  const Finding* f = Find(r, Severity::kWarning, "all_to_all");
  ASSERT_NE(f, nullptr);
  ASSERT_FALSE(f->causes.empty());
  EXPECT_NE(f->causes.front().find("peer-to-peer forced"), std::string::npos);
}

// Two GPUs on one switch whose driver allows no P2P (topo -p2p p: NS).
TEST(DoctorTest, P2pNotSupportedInTheTopology) {
  DoctorInputs in;
  in.gpu_id = "rtx4090-24gb";
  auto t = ParseTopologyFile(Input("topo.2gpu-pix-p2p-not-supported.txt"), "t");
  ASSERT_TRUE(t.ok());
  in.topology = *t;
  const DoctorReport r = Diagnose(in);
  const Finding* f = Find(r, Severity::kWarning, "peer-to-peer");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(AnyCause(*f, "GeForce"));
  EXPECT_TRUE(AnyCause(*f, "ACS"));
}

TEST(DoctorTest, NvidiaSmiReports) {
  auto narrow = ParseNvidiaSmi(Input("query-gpu.2x5060ti-x4.csv"), "csv");
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  ASSERT_EQ(narrow->size(), 2u);
  EXPECT_EQ((*narrow)[0].pcie_width_current, 4);
  EXPECT_EQ((*narrow)[0].pcie_gen_current, 1);  // idle: not a finding
  DoctorInputs in;
  in.gpus = *narrow;
  DoctorReport r = Diagnose(in);
  EXPECT_EQ(r.warnings(), 2);  // x4 of x16 on each GPU
  EXPECT_NE(Find(r, Severity::kWarning, "GPU 0 PCIe link"), nullptr);

  auto h200 = ParseNvidiaSmi(Input("query-gpu.8xh200.csv"), "csv");
  ASSERT_TRUE(h200.ok());
  in.gpus = *h200;
  r = Diagnose(in);
  EXPECT_EQ(r.gpu_id, "h200-sxm-141gb");
  EXPECT_EQ(r.gpus, 8);
  EXPECT_EQ(r.warnings(), 0);

  auto healthy = ParseNvidiaSmi(Input("smi-q.h800-healthy.txt"), "q");
  ASSERT_TRUE(healthy.ok());
  EXPECT_EQ((*healthy)[0].pcie_gen_max, 5);
  EXPECT_EQ((*healthy)[0].pcie_width_max, 16);
  EXPECT_DOUBLE_EQ((*healthy)[0].memory_mib, 81559);
  in.gpus = *healthy;
  EXPECT_EQ(Diagnose(in).warnings(), 0);
  auto hot = ParseNvidiaSmi(Input("smi-q.h800-hw-slowdown.txt"), "q");
  ASSERT_TRUE(hot.ok());
  in.gpus = *hot;
  r = Diagnose(in);
  EXPECT_NE(Find(r, Severity::kWarning, "clocks"), nullptr);

  EXPECT_FALSE(ParseNvidiaSmi("name, memory.total [MiB]\nA, 1, 2\n", "bad").ok());
  EXPECT_FALSE(ParseNvidiaSmi("hello", "bad").ok());
}

TEST(DoctorTest, BadInputIsAnError) {
  DoctorInputs in;
  in.nccl_tests = {{"all_reduce_perf.dgx-a100-4gpu-p2p-off.txt", Input("all_reduce_perf.dgx-a100-4gpu-p2p-off.txt")}};
  EXPECT_FALSE(RunDoctor(TestCatalog(), Factory(), in).ok());  // no GPU to judge against
  in.gpu_id = "no-such-gpu";
  EXPECT_FALSE(RunDoctor(TestCatalog(), Factory(), in).ok());
  in.gpu_id = "a100-sxm4-80gb";
  in.nccl_tests = {{"junk.txt", "#  size count type\n 1 2 3\n"}};
  EXPECT_FALSE(RunDoctor(TestCatalog(), Factory(), in).ok());
}

TEST(DoctorTest, JsonCarriesTheVerdict) {
  DoctorInputs in;
  in.gpu_id = "a100-sxm4-80gb";
  in.nccl_tests = {{"all_reduce_perf.dgx-a100-4gpu-p2p-off.txt", Input("all_reduce_perf.dgx-a100-4gpu-p2p-off.txt")}};
  const nlohmann::json j = DoctorJson(Diagnose(in));
  EXPECT_EQ(j["warnings"], 1);
  EXPECT_FALSE(j["healthy"].get<bool>());
  ASSERT_EQ(j["measured"].size(), 1u);
  EXPECT_NEAR(j["measured"][0]["measured_busbw_gbps"].get<double>(), 5.2, 0.05);
}

}  // namespace
}  // namespace ditune
