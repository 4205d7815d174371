// What `nvidia-smi -q` and `nvidia-smi --query-gpu=... --format=csv` say about each GPU that
// bears on speed: its name and memory, its PCIe link (generation and width, now and at
// most), and the reasons its clocks are held down.
#ifndef DITUNE_INGEST_NVIDIA_SMI_H_
#define DITUNE_INGEST_NVIDIA_SMI_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ditune {

// -1 where the output does not say.
struct GpuState {
  std::string name;
  std::string bus_id;
  double memory_mib = -1;
  int pcie_gen_current = -1;
  int pcie_gen_max = -1;         // the most this GPU and this slot allow
  int pcie_gen_device_max = -1;  // the GPU's own most (newer drivers)
  int pcie_gen_host_max = -1;    // the slot's most (newer drivers)
  int pcie_width_current = -1;
  int pcie_width_max = -1;
  // Clock event (throttle) reasons nvidia-smi marks Active, as it names them ("HW Slowdown",
  // "SW Thermal Slowdown", ...); "Idle" and "Applications Clocks Setting" are left out.
  std::vector<std::string> clock_events;
  int persistence = -1;  // 1 enabled, 0 disabled
};

// True where `text` looks like either output (an "NVSMI LOG" banner, or a CSV header whose
// first column is "name" or "index" and that names a pcie.* or memory.* column).
bool LooksLikeNvidiaSmi(std::string_view text);

// Every GPU the output lists, in order. InvalidArgument naming `origin` (and the line) for
// text that is neither output, a CSV row with the wrong number of columns, or no GPU at all.
StatusOr<std::vector<GpuState>> ParseNvidiaSmi(std::string_view text, std::string_view origin);

// `env` output or a file of NAME=VALUE lines: the NCCL_* (and CUDA_VISIBLE_DEVICES) settings
// in it. Lines of other forms are skipped ("export " prefixes and quotes removed).
std::map<std::string, std::string> ParseNcclEnvironment(std::string_view text);
// True where every line that is not blank or a '#' comment is NAME=VALUE and at least one
// names an NCCL_ variable.
bool LooksLikeEnvironment(std::string_view text);

}  // namespace ditune

#endif  // DITUNE_INGEST_NVIDIA_SMI_H_
