#include "ingest/nvidia_smi.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "core/text.h"

namespace ditune {
namespace {

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    out.push_back(l);
  }
  return out;
}

std::vector<std::string> SplitCsv(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ',') {
      out.emplace_back(Trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

// "16x", "5", "81559 MiB", "[N/A]" -> the leading number, or -1.
double Leading(std::string_view v) {
  v = Trim(v);
  if (v.empty() || !(std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '.')) return -1;
  return std::strtod(std::string(v).c_str(), nullptr);
}

int LeadingInt(std::string_view v) {
  const double d = Leading(v);
  return d < 0 || d > 1e6 ? -1 : static_cast<int>(d);
}

// Clock event reasons that mean the GPU runs below its clocks for a reason worth naming.
bool Worrying(std::string_view reason) {
  const std::string r = Lower(reason);
  return r.find("slowdown") != std::string::npos || r.find("power brake") != std::string::npos ||
         r.find("power cap") != std::string::npos;
}

StatusOr<std::vector<GpuState>> ParseQ(const std::vector<std::string>& lines, std::string_view origin) {
  std::vector<GpuState> gpus;
  std::vector<std::pair<size_t, std::string>> stack;  // (indent, section name)
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const std::string_view body = Trim(l);
    if (body.empty()) continue;
    const size_t indent = l.find_first_not_of(" \t");
    if (indent == 0 && body.starts_with("GPU ") && body.find(" : ") == std::string_view::npos) {
      gpus.emplace_back();
      gpus.back().bus_id = std::string(Trim(body.substr(4)));
      stack.clear();
      continue;
    }
    if (gpus.empty()) continue;  // the banner, driver and CUDA versions
    while (!stack.empty() && stack.back().first >= indent) stack.pop_back();
    const size_t colon = body.find(" : ");
    const bool has_value = colon != std::string_view::npos;
    const std::string key(Trim(has_value ? body.substr(0, colon) : body));
    const std::string value(has_value ? Trim(body.substr(colon + 3)) : std::string_view());
    if (!has_value) {
      stack.emplace_back(indent, key);
      continue;
    }
    std::string path;
    for (const auto& s : stack) path += s.second + "/";
    path += key;
    GpuState& g = gpus.back();
    if (path == "Product Name") {
      g.name = value;
    } else if (path == "Persistence Mode") {
      g.persistence = value == "Enabled" ? 1 : value == "Disabled" ? 0 : -1;
    } else if (path == "FB Memory Usage/Total") {
      g.memory_mib = Leading(value);
    } else if (path == "PCI/Bus Id") {
      g.bus_id = value;
    } else if (path == "PCI/GPU Link Info/PCIe Generation/Max") {
      g.pcie_gen_max = LeadingInt(value);
    } else if (path == "PCI/GPU Link Info/PCIe Generation/Current") {
      g.pcie_gen_current = LeadingInt(value);
    } else if (path == "PCI/GPU Link Info/PCIe Generation/Device Max") {
      g.pcie_gen_device_max = LeadingInt(value);
    } else if (path == "PCI/GPU Link Info/PCIe Generation/Host Max") {
      g.pcie_gen_host_max = LeadingInt(value);
    } else if (path == "PCI/GPU Link Info/Link Width/Max") {
      g.pcie_width_max = LeadingInt(value);
    } else if (path == "PCI/GPU Link Info/Link Width/Current") {
      g.pcie_width_current = LeadingInt(value);
    } else if ((path.starts_with("Clocks Throttle Reasons/") || path.starts_with("Clocks Event Reasons/")) &&
               value == "Active" && Worrying(key)) {
      g.clock_events.push_back(key);
    }
  }
  if (gpus.empty()) {
    return Status::InvalidArgument(fmt::format("{}: an `nvidia-smi -q` log without a 'GPU <bus id>' section", origin));
  }
  return gpus;
}

StatusOr<std::vector<GpuState>> ParseCsv(const std::vector<std::string>& lines, std::string_view origin) {
  size_t h = 0;
  while (h < lines.size() && Trim(lines[h]).empty()) ++h;
  std::vector<std::string> cols = SplitCsv(lines[h]);
  for (auto& c : cols) {
    // "memory.total [MiB]" -> "memory.total"
    const size_t bracket = c.find(" [");
    if (bracket != std::string::npos) c.resize(bracket);
    c = Lower(c);
  }
  std::vector<GpuState> gpus;
  for (size_t i = h + 1; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty()) continue;
    const std::vector<std::string> v = SplitCsv(lines[i]);
    if (v.size() != cols.size()) {
      return Status::InvalidArgument(fmt::format("{}:{}: {} values where the header names {} columns", origin, i + 1,
                                                 v.size(), cols.size()));
    }
    GpuState g;
    for (size_t k = 0; k < cols.size(); ++k) {
      const std::string& c = cols[k];
      const std::string& x = v[k];
      if (c == "name" || c == "gpu_name") {
        g.name = x;
      } else if (c == "pci.bus_id" || c == "gpu_bus_id") {
        g.bus_id = x;
      } else if (c == "memory.total") {
        g.memory_mib = Leading(x);
      } else if (c == "pcie.link.gen.current" || c == "pcie.link.gen.gpucurrent") {
        g.pcie_gen_current = LeadingInt(x);
      } else if (c == "pcie.link.gen.max") {
        g.pcie_gen_max = LeadingInt(x);
      } else if (c == "pcie.link.gen.gpumax") {
        g.pcie_gen_device_max = LeadingInt(x);
      } else if (c == "pcie.link.gen.hostmax") {
        g.pcie_gen_host_max = LeadingInt(x);
      } else if (c == "pcie.link.width.current") {
        g.pcie_width_current = LeadingInt(x);
      } else if (c == "pcie.link.width.max") {
        g.pcie_width_max = LeadingInt(x);
      } else if (c == "persistence_mode") {
        g.persistence = x == "Enabled" ? 1 : x == "Disabled" ? 0 : -1;
      } else if ((c.starts_with("clocks_event_reasons.") || c.starts_with("clocks_throttle_reasons.")) &&
                 x == "Active") {
        std::string reason = c.substr(c.find('.') + 1);
        std::replace(reason.begin(), reason.end(), '_', ' ');
        if (Worrying(reason)) g.clock_events.push_back(reason);
      }
    }
    gpus.push_back(std::move(g));
  }
  if (gpus.empty()) return Status::InvalidArgument(fmt::format("{}: an `nvidia-smi --query-gpu` CSV without rows", origin));
  return gpus;
}

bool IsCsvHeader(std::string_view line) {
  const std::string l = Lower(Trim(line));
  return (l.starts_with("name") || l.starts_with("index") || l.starts_with("pci.bus_id")) &&
         (l.find("pcie.") != std::string::npos || l.find("memory.") != std::string::npos ||
          l.find("clocks_") != std::string::npos);
}

}  // namespace

bool LooksLikeNvidiaSmi(std::string_view text) {
  if (text.find("NVSMI LOG") != std::string_view::npos) return true;
  for (const auto& l : Lines(text.substr(0, 4096))) {
    if (Trim(l).empty()) continue;
    return IsCsvHeader(l);
  }
  return false;
}

StatusOr<std::vector<GpuState>> ParseNvidiaSmi(std::string_view text, std::string_view origin) {
  const std::vector<std::string> lines = Lines(text);
  if (text.find("NVSMI LOG") != std::string_view::npos) return ParseQ(lines, origin);
  for (const auto& l : lines) {
    if (Trim(l).empty()) continue;
    if (IsCsvHeader(l)) return ParseCsv(lines, origin);
    break;
  }
  return Status::InvalidArgument(fmt::format(
      "{}: neither `nvidia-smi -q` output nor `nvidia-smi --query-gpu=name,memory.total,pcie.link.gen.max,"
      "pcie.link.width.current,pcie.link.width.max --format=csv` with its header line",
      origin));
}

std::map<std::string, std::string> ParseNcclEnvironment(std::string_view text) {
  std::map<std::string, std::string> env;
  for (std::string l : Lines(text)) {
    std::string_view s = Trim(l);
    if (s.starts_with("export ")) s = Trim(s.substr(7));
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    const std::string name(s.substr(0, eq));
    if (!name.starts_with("NCCL_") && name != "CUDA_VISIBLE_DEVICES" && name != "CUDA_DEVICE_ORDER") continue;
    std::string value(Trim(s.substr(eq + 1)));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    env[name] = value;
  }
  return env;
}

bool LooksLikeEnvironment(std::string_view text) {
  bool nccl = false;
  for (const auto& l : Lines(text)) {
    std::string_view s = Trim(l);
    if (s.empty() || s.front() == '#') continue;
    if (s.starts_with("export ")) s = Trim(s.substr(7));
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    for (char c : s.substr(0, eq)) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    }
    nccl = nccl || s.starts_with("NCCL_");
  }
  return nccl;
}

}  // namespace ditune
