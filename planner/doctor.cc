#include "planner/doctor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/text.h"
#include "costmodels/calibration.h"
#include "costmodels/comm_model.h"
#include "ingest/ingest.h"
#include "planner/gpu_launch.h"
#include "planner/plan.h"

namespace ditune {
namespace {

// Published P2P-off (host-staged) bus bandwidths as a fraction of the GPU's host link each way:
// on bare metal, a DGX H100's all_reduce 22.9 GB/s over PCIe 5 (0.36), 2 x RTX 2080 Ti on one
// switch 4.0 over PCIe 3 (0.25), 4 x RTX 4090 all_reduce through SHM 18 over PCIe 4 (0.56;
// NVIDIA/nccl #1603); in containers whose /dev/shm was small, a DGX A100's 5.2 over PCIe 4
// (0.16) and 8 x A40's 3.9 across a NUMA node (0.12), left out. The bare-metal median, for
// a run whose collectives were not measured.
constexpr double kHostStagedFractionOfHostLink = 0.36;

std::vector<Fit> WithoutCommFits(const std::vector<Fit>& fits) {
  std::vector<Fit> out;
  for (const auto& f : fits) {
    if (f.kind != kFitKindComm) out.push_back(f);
  }
  return out;
}

std::string Gbps(double v) { return v >= 10 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v); }

std::string Size(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:g} GiB", bytes / (1024.0 * 1024 * 1024));
  return fmt::format("{:g} MiB", bytes / (1024.0 * 1024));
}

bool Truthy(const std::string& v) { return v == "1" || Lower(v) == "true" || Lower(v) == "yes"; }

// nccl-tests output without its "# Rank" lines: the ranks from busbw / algbw, which is
// 2(n-1)/n for all_reduce and (n-1)/n for all_gather, alltoall and reduce_scatter. Each
// candidate is tried; the parser checks busbw against the factor of the collective it reads.
std::vector<int> RankCandidates(std::string_view text) {
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::vector<std::string> t;
    for (std::string x; w >> x;) t.push_back(x);
    if (t.size() < 8 || !std::isdigit(static_cast<unsigned char>(t[0][0]))) continue;
    const double algbw = std::strtod(t[6].c_str(), nullptr);
    const double busbw = std::strtod(t[7].c_str(), nullptr);
    if (algbw < 1 || busbw <= 0) continue;
    const double f = busbw / algbw;
    std::vector<int> out;
    for (double n : {f < 2 ? 2 / (2 - f) : 0.0, f < 1 ? 1 / (1 - f) : 0.0}) {
      const double r = std::round(n);
      if (r >= 2 && r <= 4096 && std::abs(n - r) < 0.15) out.push_back(static_cast<int>(r));
    }
    return out;
  }
  return {};
}

// What NCCL_DEBUG=INFO lines in an nccl-tests output say about the paths it took.
struct PathEvidence {
  int shm = 0, p2p = 0, socket = 0, ib = 0;
  bool p2p_disabled_by_env = false;
};
PathEvidence Evidence(std::string_view text) {
  PathEvidence e;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (line.find("NCCL INFO") == std::string::npos) continue;
    if (line.find(" via SHM") != std::string::npos) ++e.shm;
    if (line.find(" via P2P") != std::string::npos) ++e.p2p;
    if (line.find("via NET/Socket") != std::string::npos || line.find("NET/Socket : Using") != std::string::npos) ++e.socket;
    if (line.find("via NET/IB") != std::string::npos || line.find("NET/IB : Using") != std::string::npos) ++e.ib;
    if (line.find("NCCL_P2P_DISABLE set by environment to 1") != std::string::npos) e.p2p_disabled_by_env = true;
  }
  return e;
}

struct Context {
  const Catalog* catalog = nullptr;
  std::vector<Fit> fits;  // without comm curves: both figures on the same footing
  const GpuSpec* gpu = nullptr;
  std::shared_ptr<const MachineTopology> topology;
  std::string intra_base;  // --link when it is an intra-node link
  int box = 0;             // GPUs in the box (0: unknown)
  std::string model_id;
};

StatusOr<Cluster> BoxCluster(const Context& cx, int gpus) {
  ClusterSpec s;
  s.gpu_id = cx.gpu->id;
  s.gpus = gpus;
  s.gpus_per_node = gpus;
  s.intra_id = cx.intra_base;
  if (cx.topology != nullptr && gpus > 1 && gpus <= cx.topology->gpus) s.topology = cx.topology;
  return ResolveCluster(s, *cx.catalog);
}

// The bus bandwidth ditune prices for one collective of `bytes` over ranks 0..n-1 of the box.
StatusOr<double> PricedBusbw(const Context& cx, const std::string& collective, int n, double bytes) {
  DITUNE_ASSIGN_OR_RETURN(Cluster c, BoxCluster(cx, n));
  DITUNE_ASSIGN_OR_RETURN(CostModels m, MakeCostModels(c, cx.fits));
  DITUNE_ASSIGN_OR_RETURN(Collective coll, ParseCollective(collective));
  std::vector<int> group(n);
  for (int i = 0; i < n; ++i) group[i] = i;
  const double t = m.comm->Time(coll, Bytes(bytes), group).value();
  if (t <= 0) return Status::Internal("collective priced at zero time");
  return bytes * BusFactor(coll, n) / t / 1e9;
}

// "Ulysses-4 for flux.1-dev 1024x1024: 1.23x instead of 3.41x on this machine (...)": a DiT
// generation on n GPUs of this box as priced, against the same with every collective of the
// box at `ratio` of its priced rate.
StatusOr<std::string> CostLine(const Context& cx, int n, double ratio) {
  if (cx.gpu == nullptr || n < 2) return std::string();
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, cx.catalog->Model(cx.model_id));
  Workload w;
  w.model_id = model->id;
  w.height = model->default_height;
  w.width = model->default_width;
  w.frames = model->modality == Modality::kVideo ? model->default_frames : 1;
  w.steps = model->default_steps;
  ClusterSpec one;
  one.gpu_id = cx.gpu->id;
  one.gpus = 1;
  DITUNE_ASSIGN_OR_RETURN(Cluster c1, ResolveCluster(one, *cx.catalog));
  DITUNE_ASSIGN_OR_RETURN(Cluster priced, BoxCluster(cx, n));
  Cluster slow = priced;
  LinkSpec l = *priced.intra;
  l.busbw = l.busbw * ratio;
  l.p2p = l.p2p * ratio;
  l.cross_socket = l.cross_socket * ratio;
  slow.topology_intra = std::make_shared<const LinkSpec>(std::move(l));
  slow.intra = slow.topology_intra.get();
  const PlanOptions options;
  DITUNE_ASSIGN_OR_RETURN(SimResult r1, SimulateAsPlanned(*cx.catalog, w, c1, cx.fits, options, ParallelConfig{}));
  for (const char* method : {"ulysses", "ring"}) {
    auto config = ParseParallelConfig(fmt::format("{}={}", method, n));
    if (!config.ok()) continue;
    auto fast = SimulateAsPlanned(*cx.catalog, w, priced, cx.fits, options, *config);
    auto measured = SimulateAsPlanned(*cx.catalog, w, slow, cx.fits, options, *config);
    if (!fast.ok() || !measured.ok()) continue;
    const std::string name = std::string(method) == "ulysses" ? "Ulysses" : "Ring";
    return fmt::format("{}-{} for {} {}x{}{}: {:.2f}x instead of {:.2f}x on this machine ({:.2f} s instead of "
                       "{:.2f} s a generation, as xDiT runs it)",
                       name, n, model->id, w.height, w.width, w.frames > 1 ? fmt::format("x{}", w.frames) : "",
                       r1.total.value() / measured->total.value(), r1.total.value() / fast->total.value(),
                       measured->total.value(), fast->total.value());
  }
  return std::string();
}

std::string CostOrNothing(const Context& cx, int n, double ratio) {
  auto line = CostLine(cx, n, ratio);
  return line.ok() ? *line : std::string();
}

// What host-staged collectives (P2P off, not measured) cost a plan on n GPUs of the box: the
// collective at kHostStagedFractionOfHostLink of the GPU's host link; "" where it cannot be
// priced or would be no slower.
std::string HostStagedCost(const Context& cx, const std::string& collective, int n) {
  if (cx.gpu == nullptr) return "";
  auto priced = PricedBusbw(cx, collective, n, 1024.0 * 1024 * 1024);
  if (!priced.ok()) return "";
  const double ratio = std::min(1.0, kHostStagedFractionOfHostLink * cx.gpu->host_link.value() / 1e9 / *priced);
  const std::string line = ratio < 1 ? CostOrNothing(cx, n, ratio) : std::string();
  return line.empty() ? line
                      : line + fmt::format(" (estimated: host-staged at {:.0f}% of the host link, the median of three "
                                           "published P2P-off runs on bare metal)",
                                           100 * kHostStagedFractionOfHostLink);
}

bool IsGeForce(const std::string& name) {
  const std::string n = Lower(name);
  return n.find("geforce") != std::string::npos || n.find("rtx 40") != std::string::npos ||
         n.find("rtx 50") != std::string::npos || n.find("rtx 30") != std::string::npos;
}

int GenerationOf(const GpuSpec& gpu) {
  const double bw = gpu.host_link.value();
  return bw >= 120e9 ? 6 : bw >= 60e9 ? 5 : bw >= 30e9 ? 4 : 3;
}

const char* kP2pOffCauseAcs =
    "peer-to-peer is blocked by ACS or the IOMMU: disable VT-d, boot with iommu=pt, or turn ACS off on the PCIe "
    "switches (NVIDIA/nccl #631 and #667)";
const char* kP2pOffCauseGeForce =
    "GeForce cards have no GPUDirect P2P: NCCL stages every transfer through host memory, so a pair on one switch "
    "can be slower than a pair across sockets (NVIDIA/nccl #1309)";

}  // namespace

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kOk: return "ok";
    case Severity::kNote: return "note";
    case Severity::kWarning: return "warning";
  }
  return "?";
}

int DoctorReport::warnings() const {
  return static_cast<int>(
      std::count_if(findings.begin(), findings.end(), [](const Finding& f) { return f.severity == Severity::kWarning; }));
}

StatusOr<DoctorReport> RunDoctor(const Catalog& catalog, const std::vector<Fit>& fits, const DoctorInputs& in) {
  DoctorReport out;
  Context cx;
  cx.catalog = &catalog;
  cx.fits = WithoutCommFits(fits);
  cx.model_id = in.model_id;
  DITUNE_RETURN_IF_ERROR(catalog.Model(in.model_id).status());
  if (in.topology) cx.topology = std::make_shared<const MachineTopology>(*in.topology);

  // The GPUs: --gpu, else what nvidia-smi names.
  std::vector<std::string> names;
  for (const auto& g : in.gpus) {
    if (std::find(names.begin(), names.end(), g.name) == names.end() && !g.name.empty()) names.push_back(g.name);
  }
  if (names.size() > 1) {
    out.findings.push_back({Severity::kWarning, "GPU models",
                            fmt::format("this machine mixes GPU models ({})", fmt::join(names, ", ")),
                            {"a job spread over them runs at the slowest one's pace; pick one set with "
                             "CUDA_VISIBLE_DEVICES"},
                            ""});
  }
  if (!names.empty()) out.gpu_name = names.front();
  if (!in.gpu_id.empty()) {
    DITUNE_ASSIGN_OR_RETURN(cx.gpu, catalog.Gpu(in.gpu_id));
  } else if (!names.empty()) {
    auto id = MapGpuName(names.front(), catalog);
    if (id.ok()) {
      cx.gpu = *catalog.Gpu(*id);
    } else {
      out.findings.push_back({Severity::kNote, "GPU model",
                              fmt::format("'{}' is not in the catalog: its collectives are judged only where you "
                                          "pass --gpu with the closest entry, or add it (ditune hardware --template)",
                                          names.front()),
                              {},
                              ""});
    }
  }
  if (cx.gpu != nullptr) out.gpu_id = cx.gpu->id;
  out.gpus = in.topology ? in.topology->gpus : static_cast<int>(in.gpus.size());
  cx.box = out.gpus;

  const LinkSpec* given_link = nullptr;
  if (!in.link_id.empty()) {
    DITUNE_ASSIGN_OR_RETURN(given_link, catalog.Link(in.link_id));
    if (given_link->scope == LinkScope::kIntra) cx.intra_base = given_link->id;
  }

  // The topology.
  if (in.topology) {
    out.topology = TopologyLines(*in.topology);
    const TopologySummary s = Summarize(*in.topology);
    if (s.p2p_not_supported_pairs > 0) {
      // GeForce first where the GPU is known to be one; ACS/IOMMU first otherwise.
      const bool geforce = IsGeForce(out.gpu_name) || (cx.gpu != nullptr && IsGeForce(cx.gpu->name));
      std::vector<std::string> causes = {kP2pOffCauseAcs};
      causes.insert(geforce ? causes.begin() : causes.end(), kP2pOffCauseGeForce);
      out.findings.push_back(
          {Severity::kWarning, "peer-to-peer",
           fmt::format("the driver allows no peer-to-peer between {} pair{} of GPUs (nvidia-smi topo -p2p p: NS): "
                       "NCCL moves their traffic through host memory",
                       s.p2p_not_supported_pairs, s.p2p_not_supported_pairs == 1 ? "" : "s"),
           causes, HostStagedCost(cx, "all_reduce", in.topology->gpus)});
    }
    if (s.sockets.size() > 1) {
      out.findings.push_back({Severity::kNote, "sockets",
                              fmt::format("the GPUs sit on {} CPU sockets: a group that spans them crosses the CPUs' "
                                          "interconnect, which ditune prices apart; plans with --topology keep "
                                          "Ulysses groups within a socket where that is faster",
                                          s.sockets.size()),
                              {},
                              ""});
    }
    if (!s.nvlink_all_pairs && s.nvlinks_min > 0) {
      out.findings.push_back({Severity::kNote, "NVLink",
                              "NVLink joins only some GPUs: a collective over more GPUs than a bridged group runs at "
                              "PCIe rate (NVIDIA/nccl-tests #178: 208 GB/s on a bridged pair of A100s, 20 GB/s once a "
                              "third joins); keep two-GPU groups on the bridged pairs",
                              {},
                              ""});
    }
    if (IsGeForce(out.gpu_name) && in.topology->gpus > 1 && in.topology->p2p.empty()) {
      out.findings.push_back({Severity::kNote, "peer-to-peer", kP2pOffCauseGeForce, {}, ""});
    }
    if (cx.gpu != nullptr) {
      auto c = BoxCluster(cx, std::max(2, in.topology->gpus));
      if (c.ok()) {
        out.link_id = c->intra->id;
        out.box_notes = c->topology_notes;
      }
    }
  } else if (cx.gpu != nullptr) {
    out.link_id = cx.intra_base.empty() ? cx.gpu->default_intra : cx.intra_base;
  }

  // The NCCL environment.
  auto env = [&](const char* name) -> const std::string* {
    auto it = in.env.find(name);
    return it == in.env.end() ? nullptr : &it->second;
  };
  const int env_n = out.gpus >= 2 ? std::min(out.gpus, 8) : 2;
  if (const std::string* v = env("NCCL_P2P_DISABLE"); v != nullptr && Truthy(*v)) {
    out.findings.push_back(
        {Severity::kWarning, "NCCL_P2P_DISABLE",
         fmt::format("NCCL_P2P_DISABLE={} ({}): NCCL moves every transfer between this node's GPUs through host "
                     "memory instead of NVLink or PCIe peer-to-peer",
                     *v, in.env_origin),
         {"unset it, or set NCCL_P2P_DISABLE=0 (xDiT #526: Ulysses-2 on 2 A800s gave 1.6x with it and 1.9x "
          "without; a DGX A100's all_reduce falls from 222 to 5.2 GB/s with it)"},
         HostStagedCost(cx, "all_to_all", env_n)});
  }
  if (const std::string* v = env("NCCL_P2P_LEVEL"); v != nullptr) {
    const std::string level = Lower(*v);
    std::string text = fmt::format("NCCL_P2P_LEVEL={}: NCCL uses peer-to-peer only between GPUs at most that far "
                                   "apart and stages the rest through host memory",
                                   *v);
    Severity sev = Severity::kNote;
    if (level == "loc" || level == "0") {
      sev = Severity::kWarning;
      text += "; LOC turns it off everywhere";
    }
    out.findings.push_back({sev, "NCCL_P2P_LEVEL", text, {}, ""});
  }
  if (const std::string* v = env("NCCL_SHM_DISABLE"); v != nullptr && Truthy(*v)) {
    out.findings.push_back({Severity::kNote, "NCCL_SHM_DISABLE",
                            "NCCL_SHM_DISABLE=1: where peer-to-peer is unavailable, NCCL falls back to sockets "
                            "instead of host shared memory",
                            {},
                            ""});
  }
  if (const std::string* v = env("NCCL_IB_DISABLE"); v != nullptr && Truthy(*v)) {
    out.findings.push_back({Severity::kWarning, "NCCL_IB_DISABLE",
                            "NCCL_IB_DISABLE=1: traffic between nodes goes over TCP sockets, not InfiniBand or RoCE",
                            {"unset it where the nodes have RDMA NICs"},
                            ""});
  }
  if (const std::string* v = env("NCCL_NET"); v != nullptr && Lower(*v) == "socket") {
    out.findings.push_back({Severity::kWarning, "NCCL_NET",
                            "NCCL_NET=Socket: traffic between nodes goes over TCP sockets, not InfiniBand or RoCE",
                            {"unset it where the nodes have RDMA NICs"},
                            ""});
  }
  for (const char* forced : {"NCCL_ALGO", "NCCL_PROTO"}) {
    if (const std::string* v = env(forced); v != nullptr) {
      out.findings.push_back({Severity::kNote, forced,
                              fmt::format("{}={}: NCCL's own choice of algorithm is overridden; ditune's figures "
                                          "assume NCCL chooses",
                                          forced, *v),
                              {},
                              ""});
    }
  }

  // The GPUs' own reports.
  for (size_t i = 0; i < in.gpus.size(); ++i) {
    const GpuState& g = in.gpus[i];
    const std::string who = fmt::format("GPU {}{}", i, g.bus_id.empty() ? "" : " (" + g.bus_id + ")");
    if (g.pcie_width_current > 0 && g.pcie_width_max > 0 && g.pcie_width_current < g.pcie_width_max) {
      out.findings.push_back(
          {Severity::kWarning, who + " PCIe link",
           fmt::format("runs at x{} of x{}: {:.0f}% of its host link's bandwidth", g.pcie_width_current,
                       g.pcie_width_max, 100.0 * g.pcie_width_current / g.pcie_width_max),
           {"a slot wired narrower than x16, a riser or bifurcation, or a card not fully seated"},
           ""});
    }
    const int host_max = g.pcie_gen_host_max > 0 ? g.pcie_gen_host_max : -1;
    const int dev_max = g.pcie_gen_device_max > 0 ? g.pcie_gen_device_max
                        : cx.gpu != nullptr     ? GenerationOf(*cx.gpu)
                                                : -1;
    const int slot = host_max > 0 ? host_max : g.pcie_gen_max;
    if (slot > 0 && dev_max > 0 && slot < dev_max) {
      out.findings.push_back(
          {Severity::kWarning, who + " PCIe link",
           fmt::format("the slot allows PCIe Gen{} where the GPU has Gen{}: {:.0f}% of the host link's bandwidth",
                       slot, dev_max, 100.0 * std::pow(2.0, slot - dev_max)),
           {"an older slot or riser; move the card to a Gen" + std::to_string(dev_max) + " x16 slot"},
           ""});
    }
    if (!g.clock_events.empty()) {
      out.findings.push_back(
          {Severity::kWarning, who + " clocks",
           fmt::format("held below its clocks: {} (nvidia-smi's clock event reasons)", fmt::join(g.clock_events, ", ")),
           {"heat (check fans and inlet temperature), a power cap (nvidia-smi -q -d POWER), or the power brake "
            "of the chassis; ditune's figures assume full clocks"},
           ""});
    }
    if (cx.gpu != nullptr && g.memory_mib > 0) {
      const double catalog_mib = cx.gpu->memory.value() / (1024.0 * 1024);
      if (std::abs(g.memory_mib - catalog_mib) > 0.12 * catalog_mib) {
        out.findings.push_back({Severity::kNote, who + " memory",
                                fmt::format("nvidia-smi reports {:.0f} MiB where {} has {:.0f}: is it that GPU? "
                                            "(pass --gpu, or add yours with ditune hardware --template)",
                                            g.memory_mib, cx.gpu->id, catalog_mib),
                                {},
                                ""});
      }
    }
  }

  // nccl-tests outputs.
  for (const auto& file : in.nccl_tests) {
    if (cx.gpu == nullptr) {
      return Status::InvalidArgument(fmt::format(
          "{}: judging nccl-tests needs the GPU: pass --gpu ID (see `ditune hardware`), or an nvidia-smi report",
          file.origin));
    }
    IngestContext ctx;
    ctx.device = cx.gpu->id;
    ctx.collective = in.collective;
    ctx.link = given_link != nullptr ? given_link->id : (out.link_id.empty() ? cx.gpu->default_intra : out.link_id);
    auto parsed = ParseNcclTests(file.text, ctx, file.origin);
    if (!parsed.ok() && parsed.status().message().find("number of ranks is unknown") != std::string::npos) {
      for (int n : RankCandidates(file.text)) {
        ctx.ranks = n;
        parsed = ParseNcclTests(file.text, ctx, file.origin);
        if (parsed.ok()) break;
      }
    }
    if (!parsed.ok()) return parsed.status();
    // Each (collective, ranks) at its largest message.
    std::map<std::pair<std::string, int>, const Measurement*> largest;
    for (const auto& m : *parsed) {
      auto& slot = largest[{m.op, m.ranks}];
      if (slot == nullptr || m.bytes.value() > slot->bytes.value()) slot = &m;
    }
    const PathEvidence ev = Evidence(file.text);
    for (const auto& [key, m] : largest) {
      MeasuredCollective mc;
      mc.origin = file.origin;
      mc.collective = m->op;
      mc.ranks = m->ranks;
      mc.link = ctx.link;
      mc.bytes = m->bytes.value();
      DITUNE_ASSIGN_OR_RETURN(Collective coll, ParseCollective(m->op));
      mc.measured_gbps = mc.bytes * BusFactor(coll, mc.ranks) / m->median.value() / 1e9;
      const bool inter = given_link != nullptr && given_link->scope == LinkScope::kInter;
      const int per_node = cx.topology != nullptr ? cx.topology->gpus : cx.gpu->max_gpus_per_node;
      if (inter) {
        mc.expected_gbps = (m->op == "sendrecv" ? given_link->p2p : given_link->busbw).value() / 1e9;
      } else if (mc.ranks > per_node) {
        out.findings.push_back({Severity::kNote, fmt::format("{} ({} ranks)", m->op, mc.ranks),
                                fmt::format("{} ranks span more than one node: pass --link with the inter-node link "
                                            "to judge it",
                                            mc.ranks),
                                {},
                                ""});
        continue;
      } else {
        auto priced = PricedBusbw(cx, m->op, mc.ranks, mc.bytes);
        if (!priced.ok()) return priced.status();
        mc.expected_gbps = *priced;
      }
      out.measured.push_back(mc);
      if (mc.bytes < 64.0 * 1024 * 1024) continue;  // below it a healthy link's time is mostly latency
      const double ratio = mc.measured_gbps / mc.expected_gbps;
      const std::string subject = fmt::format("{} over {} ({} ranks)", m->op, mc.link, mc.ranks);
      const std::string text =
          fmt::format("{} GB/s bus bandwidth at {}, {:.0f}% of the {} GB/s ditune prices for this box ({})",
                      Gbps(mc.measured_gbps), Size(mc.bytes), 100 * ratio, Gbps(mc.expected_gbps), file.origin);
      if (ratio >= kDoctorNoteFraction) {
        out.findings.push_back({Severity::kOk, subject,
                                text + (ratio > 1.5 ? "; faster than priced: `ditune calibrate ingest` it so plans use "
                                                      "it"
                                                    : ""),
                                {},
                                ""});
        continue;
      }
      std::vector<std::string> causes;
      if (ev.p2p_disabled_by_env) causes.push_back("NCCL's log says NCCL_P2P_DISABLE=1 was set for this run");
      if (ev.shm > 0 && ev.p2p == 0) {
        causes.push_back("NCCL's log shows its channels ran via SHM (host memory), not peer-to-peer");
      }
      if (ev.socket > 0 && ev.ib == 0) causes.push_back("NCCL's log shows NET/Socket: TCP, not InfiniBand or RoCE");
      if (const std::string* v = env("NCCL_P2P_DISABLE"); v != nullptr && Truthy(*v)) {
        causes.push_back("NCCL_P2P_DISABLE=1 is set in the environment given");
      }
      const LinkSpec* priced_link = nullptr;
      if (auto l = catalog.Link(mc.link); l.ok()) priced_link = *l;
      if (priced_link != nullptr && priced_link->topology == LinkTopology::kSwitch) {
        causes.push_back(
            "NCCL's peer-to-peer path is off (NCCL_P2P_DISABLE=1): every transfer goes through host memory (a DGX "
            "A100's all_reduce falls from 222 to 5.2 GB/s with it, a DGX H100's from 370 to 23)");
        causes.push_back(
            "the ranks are not NVLink-connected GPUs (CUDA_VISIBLE_DEVICES, or NVLink bridges joining pairs only: "
            "nvidia-smi topo -m shows NODE or SYS between them)");
      } else if (priced_link != nullptr && priced_link->topology == LinkTopology::kPcieTwoSocket) {
        const std::string* level = env("NCCL_P2P_LEVEL");
        const std::string forced =
            "peer-to-peer forced across the CPUs' root complex (NCCL_P2P_LEVEL=SYS, or a driver patched to allow it "
            "on GeForce): CPUs make poor PCIe switches for all-to-all, which is why NCCL stages it through host "
            "memory by default (NVIDIA/nccl #1603: 4 RTX 4090s' alltoall 18 GB/s through host memory, 2 GB/s with "
            "P2P forced)";
        if (level != nullptr && (Lower(*level) == "sys" || *level == "5")) causes.push_back(forced);
        if (IsGeForce(out.gpu_name) || IsGeForce(cx.gpu->name)) causes.push_back(kP2pOffCauseGeForce);
        causes.push_back(kP2pOffCauseAcs);
        if (m->op == "all_to_all" && (level == nullptr || !(Lower(*level) == "sys" || *level == "5"))) {
          causes.push_back(forced);
        }
        causes.push_back("a slot below the GPU's PCIe generation or narrower than x16 (nvidia-smi -q under load)");
      } else if (priced_link != nullptr && priced_link->topology == LinkTopology::kNetwork) {
        causes.push_back(
            "NCCL fell back to TCP sockets (NCCL_IB_DISABLE=1, no RDMA driver or device; NCCL_DEBUG=INFO prints "
            "'NET/Socket')");
        causes.push_back("fewer NICs than GPUs per node, or NICs on the other socket than their GPUs");
      }
      out.findings.push_back({ratio < kDoctorWarnFraction ? Severity::kWarning : Severity::kNote, subject,
                              text, causes, inter ? std::string() : CostOrNothing(cx, mc.ranks, ratio)});
    }
  }
  std::stable_sort(out.findings.begin(), out.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
  return out;
}

std::string DoctorText(const DoctorReport& r) {
  std::string s;
  s += fmt::format("machine: {}{}{}\n", r.gpus > 0 ? fmt::format("{} GPU{}", r.gpus, r.gpus == 1 ? "" : "s") : "GPUs not listed",
                   r.gpu_name.empty() ? "" : " (" + r.gpu_name + ")",
                   r.gpu_id.empty() ? std::string() : fmt::format(", catalog {}, priced on {}", r.gpu_id, r.link_id));
  for (const auto& l : r.topology) s += "  " + l + "\n";
  for (const auto& l : r.box_notes) s += "  ditune: " + l + "\n";
  if (!r.measured.empty()) {
    s += "measured (nccl-tests, largest message):\n";
    for (const auto& m : r.measured) {
      s += fmt::format("  {:<14} {:>3} ranks {:>9}  {:>6} GB/s of {:>5} GB/s priced ({:.0f}%)  {}\n", m.collective,
                       m.ranks, Size(m.bytes), Gbps(m.measured_gbps), Gbps(m.expected_gbps),
                       100 * m.measured_gbps / m.expected_gbps, m.origin);
    }
  }
  if (r.findings.empty()) s += "findings: none\n";
  for (const auto& f : r.findings) {
    s += fmt::format("{}: {}: {}\n", SeverityName(f.severity), f.subject, f.text);
    for (const auto& c : f.causes) s += "  likely: " + c + "\n";
    if (!f.cost.empty()) s += "  costs: " + f.cost + "\n";
  }
  const int w = r.warnings();
  s += w == 0 ? std::string("healthy: nothing found that slows DiT plans\n")
              : fmt::format("{} warning{}\n", w, w == 1 ? "" : "s");
  return s;
}

nlohmann::json DoctorJson(const DoctorReport& r) {
  nlohmann::json measured = nlohmann::json::array();
  for (const auto& m : r.measured) {
    measured.push_back({{"file", m.origin}, {"collective", m.collective}, {"ranks", m.ranks}, {"link", m.link},
                        {"bytes", m.bytes}, {"measured_busbw_gbps", m.measured_gbps},
                        {"priced_busbw_gbps", m.expected_gbps}});
  }
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : r.findings) {
    findings.push_back({{"severity", SeverityName(f.severity)}, {"subject", f.subject}, {"text", f.text},
                        {"causes", f.causes}, {"cost", f.cost}});
  }
  return {{"gpus", r.gpus},         {"gpu_name", r.gpu_name},   {"gpu", r.gpu_id},
          {"link", r.link_id},      {"topology", r.topology},   {"box_notes", r.box_notes},
          {"measured", measured},   {"findings", findings},     {"warnings", r.warnings()},
          {"healthy", r.warnings() == 0}};
}

}  // namespace ditune
