#include "core/topology.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "core/text.h"

namespace ditune {
namespace {

// nvidia-smi writes terminal colour codes (ESC [ ... m) into its header when it thinks it
// prints to a terminal; copies of it keep them.
std::string StripEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      i += 2;
      while (i < s.size() && !std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> w;
  std::istringstream in{std::string(line)};
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// A small non-negative decimal; -1 for anything else (too long, not digits).
int SmallNumber(std::string_view digits) {
  if (digits.empty() || digits.size() > 6) return -1;
  int v = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

bool IsGpuName(std::string_view w) {
  return w.size() > 3 && w.starts_with("GPU") &&
         std::all_of(w.begin() + 3, w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

struct Cell {
  TopoPath path = TopoPath::kSys;
  int nvlinks = 0;
};

// One cell of `topo -m`; false for anything else.
bool ParsePathCell(std::string_view w, Cell* cell) {
  if (w == "X") {
    *cell = {TopoPath::kSelf, 0};
  } else if (w == "PIX") {
    *cell = {TopoPath::kPix, 0};
  } else if (w == "PXB") {
    *cell = {TopoPath::kPxb, 0};
  } else if (w == "PHB") {
    *cell = {TopoPath::kPhb, 0};
  } else if (w == "NODE") {
    *cell = {TopoPath::kNode, 0};
  } else if (w == "SYS" || w == "SOC") {
    *cell = {TopoPath::kSys, 0};
  } else if (w.size() > 2 && w.starts_with("NV") &&
             std::all_of(w.begin() + 2, w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const int n = SmallNumber(w.substr(2));
    if (n < 1 || n > 64) return false;
    *cell = {TopoPath::kNvLink, n};
  } else {
    return false;
  }
  return true;
}

// One cell of `topo -p2p p` (OK, or why not: CNS, GNS, TNS, NS, U); false for anything else.
bool ParseP2pCell(std::string_view w, P2pStatus* s) {
  if (w == "X" || w == "U") {
    *s = P2pStatus::kUnknown;
  } else if (w == "OK") {
    *s = P2pStatus::kOk;
  } else if (w == "NS" || w == "CNS" || w == "GNS" || w == "TNS") {
    *s = P2pStatus::kNotSupported;
  } else {
    return false;
  }
  return true;
}

std::string CellText(TopoPath p, int nvlinks) {
  return p == TopoPath::kNvLink ? fmt::format("NV{}", nvlinks) : std::string(TopoPathName(p));
}

std::string GroupText(const std::vector<int>& g) {
  if (g.size() > 2) {
    bool run = true;
    for (size_t i = 1; i < g.size(); ++i) run = run && g[i] == g[i - 1] + 1;
    if (run) return fmt::format("{}-{}", g.front(), g.back());
  }
  return fmt::format("{}", fmt::join(g, ","));
}

std::string GroupsText(const std::vector<std::vector<int>>& groups) {
  std::vector<std::string> parts;
  for (const auto& g : groups) parts.push_back(GroupText(g));
  return fmt::format("{}", fmt::join(parts, " | "));
}

// Connected components of the GPUs under `joined`, each in GPU order, ordered by first GPU.
template <typename Joined>
std::vector<std::vector<int>> Components(int n, Joined joined) {
  std::vector<int> comp(n, -1);
  std::vector<std::vector<int>> out;
  for (int s = 0; s < n; ++s) {
    if (comp[s] >= 0) continue;
    const int id = static_cast<int>(out.size());
    out.emplace_back();
    std::vector<int> stack = {s};
    comp[s] = id;
    while (!stack.empty()) {
      const int a = stack.back();
      stack.pop_back();
      out[id].push_back(a);
      for (int b = 0; b < n; ++b) {
        if (comp[b] < 0 && joined(a, b)) {
          comp[b] = id;
          stack.push_back(b);
        }
      }
    }
    std::sort(out[id].begin(), out[id].end());
  }
  return out;
}

bool Consecutive(const std::vector<std::vector<int>>& groups) {
  for (const auto& g : groups) {
    for (size_t i = 1; i < g.size(); ++i) {
      if (g[i] != g[i - 1] + 1) return false;
    }
  }
  return true;
}

bool SameSizes(const std::vector<std::vector<int>>& groups) {
  for (const auto& g : groups) {
    if (g.size() != groups.front().size()) return false;
  }
  return true;
}

Status CheckShape(const MachineTopology& t, std::string_view origin) {
  const size_t n = static_cast<size_t>(t.gpus);
  if (t.gpus < 1) return Status::InvalidArgument(fmt::format("{}: the topology lists no GPU", origin));
  if (t.path.size() != n || t.nvlinks.size() != n) {
    return Status::InvalidArgument(fmt::format("{}: the GPU matrix is not {} x {}", origin, n, n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (t.path[i].size() != n || t.nvlinks[i].size() != n) {
      return Status::InvalidArgument(fmt::format("{}: row GPU{} has {} cells, not {}", origin, i, t.path[i].size(), n));
    }
    for (size_t j = 0; j < n; ++j) {
      if ((i == j) != (t.path[i][j] == TopoPath::kSelf)) {
        return Status::InvalidArgument(fmt::format("{}: GPU{} to GPU{} is '{}': 'X' belongs on the diagonal only",
                                                   origin, i, j, CellText(t.path[i][j], t.nvlinks[i][j])));
      }
      if (t.path[i][j] != t.path[j][i] || t.nvlinks[i][j] != t.nvlinks[j][i]) {
        return Status::InvalidArgument(fmt::format("{}: GPU{} to GPU{} is {} but GPU{} to GPU{} is {}", origin, i, j,
                                                   CellText(t.path[i][j], t.nvlinks[i][j]), j, i,
                                                   CellText(t.path[j][i], t.nvlinks[j][i])));
      }
    }
  }
  if (!t.p2p.empty()) {
    if (t.p2p.size() != n) return Status::InvalidArgument(fmt::format("{}: the P2P matrix is not {} x {}", origin, n, n));
    for (const auto& row : t.p2p) {
      if (row.size() != n) return Status::InvalidArgument(fmt::format("{}: the P2P matrix is not {} x {}", origin, n, n));
    }
  }
  for (const auto& nic : t.nics) {
    if (nic.to_gpu.size() != n) {
      return Status::InvalidArgument(fmt::format("{}: NIC {} lists {} GPUs, not {}", origin, nic.name, nic.to_gpu.size(), n));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view TopoPathName(TopoPath p) {
  switch (p) {
    case TopoPath::kSelf: return "X";
    case TopoPath::kNvLink: return "NV";
    case TopoPath::kPix: return "PIX";
    case TopoPath::kPxb: return "PXB";
    case TopoPath::kPhb: return "PHB";
    case TopoPath::kNode: return "NODE";
    case TopoPath::kSys: return "SYS";
  }
  return "?";
}

StatusOr<MachineTopology> ParseTopoMatrix(std::string_view raw, std::string_view origin) {
  const std::string text = StripEscapes(raw);
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  MachineTopology t;
  t.source = std::string(origin);
  std::map<std::string, std::string> nic_legend;  // NIC0 -> mlx5_0
  for (const auto& l : lines) {
    const std::vector<std::string> w = Words(l);
    if (w.size() == 2 && w[0].size() > 4 && w[0].starts_with("NIC") && w[0].back() == ':') {
      nic_legend[w[0].substr(0, w[0].size() - 1)] = w[1];
    }
  }
  bool have_paths = false, have_p2p = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> head = Words(lines[i]);
    if (head.empty() || head[0] != "GPU0") continue;
    // A header: device columns up to "CPU Affinity" / "NUMA Affinity" / "GPU NUMA ID".
    std::vector<std::string> cols;
    for (const auto& w : head) {
      if (w == "CPU" || w == "NUMA" || w == "GPU" || w == "...") break;
      cols.push_back(w);
    }
    int gpus = 0;
    while (gpus < static_cast<int>(cols.size()) && IsGpuName(cols[gpus])) {
      if (gpus == 1024) {
        return Status::InvalidArgument(fmt::format("{}:{}: more than 1024 GPU columns", origin, i + 1));
      }
      if (cols[gpus] != fmt::format("GPU{}", gpus)) {
        return Status::InvalidArgument(fmt::format("{}:{}: column '{}' where GPU{} was expected", origin, i + 1,
                                                   cols[gpus], gpus));
      }
      ++gpus;
    }
    const bool abbreviated = std::find(head.begin(), head.end(), "...") != head.end();
    if (abbreviated) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: the matrix is abbreviated ('...'): paste the whole output of `nvidia-smi topo -m`", origin, i + 1));
    }
    // The rows that follow, up to a blank line or the legend.
    std::vector<std::pair<size_t, std::vector<std::string>>> rows;
    size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      std::vector<std::string> w = Words(lines[j]);
      if (w.empty() || w[0] == "Legend:") break;
      rows.emplace_back(j, std::move(w));
    }
    // Which matrix: `topo -p2p p` cells are OK/NS/...; `topo -m` cells are paths.
    bool p2p_matrix = false;
    if (!rows.empty() && rows[0].second.size() > 1) {
      P2pStatus s;
      Cell c;
      for (size_t k = 1; k < rows[0].second.size() && k <= cols.size(); ++k) {
        if (rows[0].second[k] == "X") continue;
        p2p_matrix = ParseP2pCell(rows[0].second[k], &s) && !ParsePathCell(rows[0].second[k], &c);
        break;
      }
    }
    if (p2p_matrix) {
      if (have_p2p) continue;
      if (!have_paths || gpus != t.gpus) {
        return Status::InvalidArgument(fmt::format(
            "{}:{}: a `topo -p2p` matrix without the `nvidia-smi topo -m` matrix of the same GPUs before it", origin,
            i + 1));
      }
      t.p2p.assign(gpus, std::vector<P2pStatus>(gpus, P2pStatus::kUnknown));
      int seen = 0;
      for (const auto& [line, w] : rows) {
        if (!IsGpuName(w[0])) continue;
        const int g = SmallNumber(std::string_view(w[0]).substr(3));
        if (g < 0 || g >= gpus || static_cast<int>(w.size()) < gpus + 1) {
          return Status::InvalidArgument(
              fmt::format("{}:{}: P2P row '{}' does not match the {} GPU columns", origin, line + 1, w[0], gpus));
        }
        for (int k = 0; k < gpus; ++k) {
          if (!ParseP2pCell(w[k + 1], &t.p2p[g][k])) {
            return Status::InvalidArgument(fmt::format(
                "{}:{}: P2P cell '{}' (valid: X, OK, NS, CNS, GNS, TNS, U)", origin, line + 1, w[k + 1]));
          }
        }
        ++seen;
      }
      if (seen != gpus) {
        return Status::InvalidArgument(fmt::format("{}:{}: the P2P matrix has {} GPU rows, not {}", origin, i + 1, seen, gpus));
      }
      have_p2p = true;
      continue;
    }
    if (have_paths) continue;  // a second copy of the same matrix
    if (gpus == 0) {
      return Status::InvalidArgument(fmt::format("{}:{}: a matrix header without GPU columns", origin, i + 1));
    }
    const int ncols = static_cast<int>(cols.size());
    t.gpus = gpus;
    t.path.assign(gpus, std::vector<TopoPath>(gpus, TopoPath::kSys));
    t.nvlinks.assign(gpus, std::vector<int>(gpus, 0));
    t.numa.assign(gpus, -1);
    t.cpu_affinity.assign(gpus, "");
    std::vector<bool> seen(gpus, false);
    for (int c = gpus; c < ncols; ++c) {
      auto it = nic_legend.find(cols[c]);
      t.nics.push_back({it != nic_legend.end() ? it->second : cols[c], std::vector<TopoPath>(gpus, TopoPath::kSys)});
    }
    for (const auto& [line, w] : rows) {
      const auto col = std::find(cols.begin(), cols.end(), w[0]);
      if (col == cols.end()) {
        return Status::InvalidArgument(fmt::format("{}:{}: row '{}' is not one of the header's devices ({})", origin,
                                                   line + 1, w[0], fmt::join(cols, ", ")));
      }
      const int r = static_cast<int>(col - cols.begin());
      // A NIC row may stop after its own cells; a GPU row must have every device's.
      const int need = r < gpus ? ncols : gpus;
      if (static_cast<int>(w.size()) < need + 1) {
        return Status::InvalidArgument(fmt::format("{}:{}: row '{}' has {} cells where the header names {} devices",
                                                   origin, line + 1, w[0], w.size() - 1, ncols));
      }
      for (int k = 0; k < need; ++k) {
        Cell cell;
        if (!ParsePathCell(w[k + 1], &cell)) {
          return Status::InvalidArgument(fmt::format(
              "{}:{}: cell '{}' in row '{}' (valid: X, NV#, PIX, PXB, PHB, NODE, SYS)", origin, line + 1, w[k + 1], w[0]));
        }
        if (r < gpus && k < gpus) {
          t.path[r][k] = cell.path;
          t.nvlinks[r][k] = cell.nvlinks;
        } else if (r < gpus) {
          // A NIC is reached over PCIe: never itself, never over NVLink.
          if (cell.path == TopoPath::kSelf || cell.path == TopoPath::kNvLink) {
            return Status::InvalidArgument(fmt::format(
                "{}:{}: GPU{} to NIC '{}' is '{}' (valid for a NIC: PIX, PXB, PHB, NODE, SYS)", origin, line + 1, r,
                cols[k], w[k + 1]));
          }
          t.nics[k - gpus].to_gpu[r] = cell.path;
        }
      }
      if (r < gpus) {
        seen[r] = true;
        // CPU affinity, NUMA affinity, GPU NUMA ID, where given.
        if (static_cast<int>(w.size()) > ncols + 1) t.cpu_affinity[r] = w[ncols + 1];
        if (static_cast<int>(w.size()) > ncols + 2 && !w[ncols + 2].empty() &&
            std::isdigit(static_cast<unsigned char>(w[ncols + 2][0]))) {
          t.numa[r] = SmallNumber(w[ncols + 2]);
        }
      }
    }
    for (int g = 0; g < gpus; ++g) {
      if (!seen[g]) return Status::InvalidArgument(fmt::format("{}:{}: no row for GPU{}", origin, i + 1, g));
    }
    have_paths = true;
    i = j;
  }
  if (!have_paths) {
    return Status::InvalidArgument(fmt::format(
        "{}: no `nvidia-smi topo -m` matrix (a header row starting GPU0, then a row per GPU)", origin));
  }
  DITUNE_RETURN_IF_ERROR(CheckShape(t, origin));
  return t;
}

nlohmann::json TopologyToJson(const MachineTopology& t) {
  nlohmann::json paths = nlohmann::json::array();
  for (int i = 0; i < t.gpus; ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (int j = 0; j < t.gpus; ++j) row.push_back(CellText(t.path[i][j], t.nvlinks[i][j]));
    paths.push_back(row);
  }
  nlohmann::json j = {{"format", "ditune-topology"}, {"version", 1}, {"gpus", t.gpus}, {"paths", paths},
                      {"numa", t.numa}, {"cpu_affinity", t.cpu_affinity}, {"source", t.source}};
  if (!t.p2p.empty()) {
    nlohmann::json p = nlohmann::json::array();
    for (const auto& row : t.p2p) {
      nlohmann::json r = nlohmann::json::array();
      for (P2pStatus s : row) r.push_back(s == P2pStatus::kOk ? "OK" : s == P2pStatus::kNotSupported ? "NS" : "U");
      p.push_back(r);
    }
    j["p2p"] = p;
  }
  nlohmann::json nics = nlohmann::json::array();
  for (const auto& n : t.nics) {
    nlohmann::json to = nlohmann::json::array();
    for (TopoPath p : n.to_gpu) to.push_back(std::string(TopoPathName(p)));
    nics.push_back({{"name", n.name}, {"to_gpu", to}});
  }
  j["nics"] = nics;
  return j;
}

StatusOr<MachineTopology> TopologyFromJson(const nlohmann::json& j, std::string_view origin) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("{}: {} (a topology file as `ditune doctor --write-topology` writes it: "
                                               "{{\"format\": \"ditune-topology\", \"gpus\": N, \"paths\": [[\"X\", \"NV12\", ...], ...]}})",
                                               origin, what));
  };
  if (!j.is_object()) return bad("not a JSON object");
  if (j.value("format", "") != "ditune-topology") return bad("\"format\" is not \"ditune-topology\"");
  if (!j.contains("gpus") || !j["gpus"].is_number_integer() || j["gpus"].get<int64_t>() < 1 ||
      j["gpus"].get<int64_t>() > 1024) {
    return bad("\"gpus\" must be an integer from 1 to 1024");
  }
  MachineTopology t;
  t.gpus = j["gpus"].get<int>();
  t.source = j.contains("source") && j["source"].is_string() ? j["source"].get<std::string>() : std::string(origin);
  const size_t n = static_cast<size_t>(t.gpus);
  if (!j.contains("paths") || !j["paths"].is_array() || j["paths"].size() != n) {
    return bad(fmt::format("\"paths\" must hold {} rows", n));
  }
  t.path.assign(n, std::vector<TopoPath>(n, TopoPath::kSys));
  t.nvlinks.assign(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    const auto& row = j["paths"][i];
    if (!row.is_array() || row.size() != n) return bad(fmt::format("\"paths\" row {} must hold {} cells", i, n));
    for (size_t k = 0; k < n; ++k) {
      Cell c;
      if (!row[k].is_string() || !ParsePathCell(row[k].get<std::string>(), &c)) {
        return bad(fmt::format("\"paths\"[{}][{}] must be one of X, NV#, PIX, PXB, PHB, NODE, SYS", i, k));
      }
      t.path[i][k] = c.path;
      t.nvlinks[i][k] = c.nvlinks;
    }
  }
  t.numa.assign(n, -1);
  t.cpu_affinity.assign(n, "");
  if (j.contains("numa")) {
    if (!j["numa"].is_array() || j["numa"].size() != n) return bad(fmt::format("\"numa\" must hold {} integers", n));
    for (size_t i = 0; i < n; ++i) {
      if (!j["numa"][i].is_number_integer()) return bad(fmt::format("\"numa\"[{}] must be an integer (-1: unknown)", i));
      t.numa[i] = j["numa"][i].get<int>();
    }
  }
  if (j.contains("cpu_affinity")) {
    if (!j["cpu_affinity"].is_array() || j["cpu_affinity"].size() != n) {
      return bad(fmt::format("\"cpu_affinity\" must hold {} strings", n));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!j["cpu_affinity"][i].is_string()) return bad(fmt::format("\"cpu_affinity\"[{}] must be a string", i));
      t.cpu_affinity[i] = j["cpu_affinity"][i].get<std::string>();
    }
  }
  if (j.contains("p2p")) {
    if (!j["p2p"].is_array() || j["p2p"].size() != n) return bad(fmt::format("\"p2p\" must hold {} rows", n));
    t.p2p.assign(n, std::vector<P2pStatus>(n, P2pStatus::kUnknown));
    for (size_t i = 0; i < n; ++i) {
      const auto& row = j["p2p"][i];
      if (!row.is_array() || row.size() != n) return bad(fmt::format("\"p2p\" row {} must hold {} cells", i, n));
      for (size_t k = 0; k < n; ++k) {
        if (!row[k].is_string() || !ParseP2pCell(row[k].get<std::string>(), &t.p2p[i][k])) {
          return bad(fmt::format("\"p2p\"[{}][{}] must be one of X, OK, NS, CNS, GNS, TNS, U", i, k));
        }
      }
    }
  }
  if (j.contains("nics")) {
    if (!j["nics"].is_array()) return bad("\"nics\" must be an array");
    for (const auto& nic : j["nics"]) {
      if (!nic.is_object() || !nic.contains("name") || !nic["name"].is_string() || !nic.contains("to_gpu") ||
          !nic["to_gpu"].is_array() || nic["to_gpu"].size() != n) {
        return bad(fmt::format("each of \"nics\" must be {{\"name\": ..., \"to_gpu\": [{} paths]}}", n));
      }
      TopoNic out{nic["name"].get<std::string>(), {}};
      for (const auto& p : nic["to_gpu"]) {
        Cell c;
        if (!p.is_string() || !ParsePathCell(p.get<std::string>(), &c) || c.path == TopoPath::kSelf ||
            c.path == TopoPath::kNvLink) {
          return bad(fmt::format("NIC {}: paths must be one of PIX, PXB, PHB, NODE, SYS", out.name));
        }
        out.to_gpu.push_back(c.path);
      }
      t.nics.push_back(std::move(out));
    }
  }
  DITUNE_RETURN_IF_ERROR(CheckShape(t, origin));
  return t;
}

StatusOr<MachineTopology> ParseTopologyFile(std::string_view text, std::string_view origin) {
  const std::string_view body = Trim(text);
  if (!body.empty() && body.front() == '{') {
    nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status::InvalidArgument(fmt::format("{}: not valid JSON", origin));
    return TopologyFromJson(j, origin);
  }
  return ParseTopoMatrix(text, origin);
}

StatusOr<MachineTopology> ReadTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument(fmt::format(
        "cannot read topology file '{}' (give the output of `nvidia-smi topo -m` saved to a file, or a file "
        "`ditune doctor --write-topology` wrote)",
        path));
  }
  std::ostringstream s;
  s << in.rdbuf();
  return ParseTopologyFile(s.str(), path);
}

TopologySummary Summarize(const MachineTopology& t) {
  TopologySummary s;
  const int n = t.gpus;
  s.sockets = Components(n, [&](int a, int b) { return t.path[a][b] != TopoPath::kSys; });
  s.switches = Components(n, [&](int a, int b) { return t.path[a][b] == TopoPath::kPix || t.path[a][b] == TopoPath::kPxb; });
  s.nvlink_groups = Components(n, [&](int a, int b) { return t.path[a][b] == TopoPath::kNvLink; });
  bool all = n > 1;
  int narrowest = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      if (t.path[a][b] != TopoPath::kNvLink) {
        all = false;
      } else {
        narrowest = narrowest == 0 ? t.nvlinks[a][b] : std::min(narrowest, t.nvlinks[a][b]);
      }
      if (a < b && !t.p2p.empty() && t.p2p[a][b] == P2pStatus::kNotSupported) ++s.p2p_not_supported_pairs;
    }
  }
  s.nvlink_all_pairs = all;
  s.nvlinks_min = narrowest;
  s.consecutive = Consecutive(s.sockets) && Consecutive(s.switches);
  s.uniform = SameSizes(s.sockets) && SameSizes(s.switches);
  return s;
}

std::vector<std::string> TopologyLines(const MachineTopology& t) {
  const TopologySummary s = Summarize(t);
  std::vector<std::string> out;
  out.push_back(fmt::format("{} GPU{} on {} CPU socket{} ({})", t.gpus, t.gpus == 1 ? "" : "s", s.sockets.size(),
                            s.sockets.size() == 1 ? "" : "s", GroupsText(s.sockets)));
  if (s.nvlink_all_pairs) {
    out.push_back(fmt::format("NVLink between every pair (NV{} at the narrowest)", s.nvlinks_min));
  } else if (s.nvlinks_min > 0) {
    std::vector<std::vector<int>> joined;
    for (const auto& g : s.nvlink_groups) {
      if (g.size() > 1) joined.push_back(g);
    }
    out.push_back(fmt::format("NVLink only inside groups ({}; NV{} at the narrowest); PCIe between them",
                              GroupsText(joined), s.nvlinks_min));
  } else {
    out.push_back("no NVLink: every transfer crosses PCIe");
  }
  if (!s.nvlink_all_pairs) {
    std::vector<std::vector<int>> shared;
    for (const auto& g : s.switches) {
      if (g.size() > 1) shared.push_back(g);
    }
    out.push_back(shared.empty() ? std::string("no two GPUs share a PCIe switch (each on its own root port)")
                                 : fmt::format("PCIe switches shared by GPUs {}", GroupsText(shared)));
  }
  if (!t.p2p.empty()) {
    out.push_back(s.p2p_not_supported_pairs == 0
                      ? std::string("peer-to-peer: OK between every pair (nvidia-smi topo -p2p p)")
                      : fmt::format("peer-to-peer: not supported between {} pair{} (nvidia-smi topo -p2p p)",
                                    s.p2p_not_supported_pairs, s.p2p_not_supported_pairs == 1 ? "" : "s"));
  }
  if (!t.nics.empty()) {
    std::vector<std::string> nics;
    for (const auto& nic : t.nics) {
      std::vector<int> near;
      for (int g = 0; g < t.gpus; ++g) {
        if (nic.to_gpu[g] == TopoPath::kPix || nic.to_gpu[g] == TopoPath::kPxb) near.push_back(g);
      }
      nics.push_back(near.empty() ? nic.name : fmt::format("{} (GPUs {} on its switch)", nic.name, GroupText(near)));
    }
    out.push_back(fmt::format("NICs: {}", fmt::join(nics, ", ")));
  }
  return out;
}

StatusOr<LinkSpec> LinkForTopology(const MachineTopology& t, const GpuSpec& gpu, const Catalog& catalog,
                                   std::vector<std::string>* notes, std::string_view base_id) {
  const TopologySummary s = Summarize(t);
  const LinkSpec* given = nullptr;
  if (!base_id.empty()) {
    DITUNE_ASSIGN_OR_RETURN(given, catalog.Link(base_id));
  }
  auto note = [&](std::string text) {
    if (notes != nullptr) notes->push_back(std::move(text));
  };
  LinkSpec link;
  if (t.gpus > 1 && s.nvlink_all_pairs) {
    // NVLink everywhere: the GPU's usual NVLink, else the catalog's NVLink whose line is
    // nearest NV# x 25 GB/s (each NVLink 2, 3 and 4 lane moves 25 GB/s each way).
    DITUNE_ASSIGN_OR_RETURN(const LinkSpec* usual, catalog.Link(gpu.default_intra));
    const LinkSpec* pick = given != nullptr && given->id.starts_with("nvlink") ? given
                           : usual->id.starts_with("nvlink")                  ? usual
                                                                              : nullptr;
    if (pick == nullptr) {
      const double want = s.nvlinks_min * 25e9;
      for (const auto& l : catalog.links()) {
        if (l.scope != LinkScope::kIntra || !l.id.starts_with("nvlink") || l.topology != LinkTopology::kSwitch) continue;
        if (pick == nullptr || std::abs(l.line.value() - want) < std::abs(pick->line.value() - want)) pick = &l;
      }
    }
    if (pick == nullptr) return Status::NotFound("the catalog has no NVLink link");
    link = *pick;
    note(fmt::format("NVLink between every pair (NV{}): priced as {}", s.nvlinks_min, link.id));
  } else {
    DITUNE_ASSIGN_OR_RETURN(const LinkSpec* usual, catalog.Link(gpu.default_intra));
    std::string base = given != nullptr && given->topology == LinkTopology::kPcieTwoSocket ? given->id
                       : usual->topology == LinkTopology::kPcieTwoSocket                     ? usual->id
                       : gpu.host_link.value() >= 60e9                   ? "pcie5"
                       : gpu.host_link.value() >= 30e9                   ? "pcie4"
                                                                         : "pcie3";
    DITUNE_ASSIGN_OR_RETURN(const LinkSpec* pcie, catalog.Link(base));
    link = *pcie;
    link.topology = LinkTopology::kPcieTwoSocket;
    link.sockets = std::max<int>(1, static_cast<int>(s.sockets.size()));
    // The switches' common size; 0 where the GPUs sit on root ports.
    std::map<size_t, int> sizes;
    for (const auto& g : s.switches) sizes[g.size()]++;
    size_t common = 1;
    int most = 0;
    for (const auto& [size, count] : sizes) {
      if (count > most) {
        most = count;
        common = size;
      }
    }
    link.gpus_per_switch = common > 1 ? static_cast<int>(common) : 0;
    if (s.nvlinks_min > 0) {
      std::vector<std::vector<int>> joined;
      for (const auto& g : s.nvlink_groups) {
        if (g.size() > 1) joined.push_back(g);
      }
      note(fmt::format(
          "NVLink bridges join GPUs {} only: every collective is priced at the PCIe rate of {}, though one inside a "
          "bridged group runs far faster (NVIDIA/nccl-tests #178: 208 GB/s on a bridged pair of A100s, 20 GB/s "
          "once a third GPU joins)",
          GroupsText(joined), link.id));
    }
    if (!s.uniform) {
      note(fmt::format("the switches or sockets hold different numbers of GPUs ({} | {}): priced as {} GPU{} a switch",
                       GroupsText(s.switches), GroupsText(s.sockets), common, common == 1 ? "" : "s"));
    }
    note(fmt::format("PCIe box: {} socket{}, {}; priced on {} with this layout", link.sockets,
                     link.sockets == 1 ? "" : "s",
                     link.gpus_per_switch > 0 ? fmt::format("{} GPUs a switch", link.gpus_per_switch)
                                              : std::string("GPUs on root ports"),
                     link.id));
  }
  if (!s.consecutive) {
    // Ranks take GPUs in CUDA order: list the GPUs socket by socket, switch by switch.
    std::vector<int> order;
    for (const auto& sock : s.sockets) {
      for (const auto& sw : s.switches) {
        if (std::find(sock.begin(), sock.end(), sw.front()) != sock.end()) order.insert(order.end(), sw.begin(), sw.end());
      }
    }
    note(fmt::format(
        "the sockets or switches do not hold consecutive GPUs; ranks take GPUs in order, so run with "
        "CUDA_VISIBLE_DEVICES={} (the layout is priced as if you do)",
        fmt::join(order, ",")));
  }
  link.box_gpus = t.gpus;
  link.layout_source = t.source;
  return link;
}

}  // namespace ditune
