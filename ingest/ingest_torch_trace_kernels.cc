// A PyTorch profiler trace's GPU kernel time by class (gemm, attention, nccl, other): over the
// whole trace, and per "ProfilerStep#N" window and per denoising step where the trace has
// windows, for the reader in ingest_torch_trace.cc.
//
// A window's kernels are those whose launch lies in it: the CUDA runtime or driver call with
// the kernel's "correlation" starts inside the window (the GPU runs behind the host, so a
// kernel launched late in one step may start after its window ends); a kernel whose launch
// the trace does not hold counts by its own start. xDiT's runner steps the profiler once per
// pipeline call, so a window is one generation of the run's `steps` denoising steps.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/ingest_torch_trace_impl.h"

namespace ditune::ingest_internal::torch_trace {
namespace {

using Json = nlohmann::json;

// The kernel classes, in the order the params list them.
constexpr std::string_view kClasses[] = {"gemm", "attention", "nccl", "other"};

Json ClassSeconds(const std::map<std::string_view, double>& seconds, double divisor) {
  Json out = Json::object();
  for (std::string_view c : kClasses) {
    const auto it = seconds.find(c);
    out[std::string(c)] = (it == seconds.end() ? 0.0 : it->second) / divisor;
  }
  return out;
}

// The "correlation" that links a launch to its kernel: a whole number, or nullopt.
std::optional<int64_t> Correlation(const Event& e) {
  if (e.args == nullptr) return std::nullopt;
  const auto it = e.args->find("correlation");
  if (it == e.args->end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

bool IsNcclKernel(const Event& k) {
  std::string_view n = k.name;
  if (n.starts_with("void ")) n.remove_prefix(5);
  return n.starts_with("ncclDevKernel") || n.starts_with("ncclKernel") ||
         (k.args != nullptr && k.args->contains("Collective name"));
}

std::string_view KernelClass(const Event& k) {
  if (IsNcclKernel(k)) return "nccl";
  const std::string n = Lower(k.name);
  for (std::string_view w : {"flash", "fmha", "attention", "attn"}) {
    if (n.find(w) != std::string::npos) return "attention";
  }
  for (std::string_view w : {"gemm", "cutlass", "xmma", "nvjet", "cublas"}) {
    if (n.find(w) != std::string::npos) return "gemm";
  }
  return "other";
}

std::vector<std::pair<double, double>> ProfilerWindows(const std::vector<Event>& events) {
  std::vector<std::pair<double, double>> windows;
  for (const Event& e : events) {
    if (e.kind == Kind::kHost && e.name.starts_with("ProfilerStep#")) {
      windows.emplace_back(e.ts_us, e.end_us());
    }
  }
  std::sort(windows.begin(), windows.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& w : windows) {
    // Consecutive steps touch (one ends where the next begins) and stay apart.
    if (!merged.empty() && w.first < merged.back().second) {
      merged.back().second = std::max(merged.back().second, w.second);
    } else {
      merged.push_back(w);
    }
  }
  return merged;
}

std::optional<Measurement> KernelTimeByClass(const std::vector<Event>& events,
                                             const IngestContext& ctx,
                                             std::optional<int> world_size, std::optional<int> rank,
                                             const std::function<void(std::string_view)>& warn) {
  std::map<int64_t, double> launched_us;  // a launch's start by its correlation
  for (const Event& e : events) {
    if (e.kind != Kind::kRuntime) continue;
    if (const auto c = Correlation(e)) launched_us.emplace(*c, e.ts_us);
  }
  const std::vector<std::pair<double, double>> windows = ProfilerWindows(events);
  std::map<std::string_view, double> seconds;
  std::vector<std::map<std::string_view, double>> in_window(windows.size());
  double memcpy_s = 0;
  std::optional<double> first, last;  // the GPU's busy span, µs
  int64_t kernels = 0;
  for (const Event& e : events) {
    if (e.kind != Kind::kKernel && e.kind != Kind::kMemcpy) continue;
    if (!first) first = e.ts_us;
    last = std::max(last.value_or(e.end_us()), e.end_us());
    if (e.kind == Kind::kMemcpy) {
      memcpy_s += e.dur_us * 1e-6;
      continue;
    }
    const std::string_view cls = KernelClass(e);
    seconds[cls] += e.dur_us * 1e-6;
    ++kernels;
    const auto c = Correlation(e);
    const auto launch = c ? launched_us.find(*c) : launched_us.end();
    const double at = launch != launched_us.end() ? launch->second : e.ts_us;
    // The window that starts last at or before `at`, if `at` lies inside it.
    auto w = std::upper_bound(windows.begin(), windows.end(), std::make_pair(at, 1e300));
    if (w == windows.begin()) continue;
    --w;
    if (at < w->second) in_window[static_cast<size_t>(w - windows.begin())][cls] += e.dur_us * 1e-6;
  }
  if (kernels == 0) return std::nullopt;
  Measurement m;
  m.source = MeasurementSource::kImport;
  m.kind = MeasurementKind::kE2e;
  m.op = "profile";
  m.backend = "xdit";
  m.device = ctx.device;
  m.median = Microseconds(*last - *first);
  m.p10 = m.median;
  m.p90 = m.median;
  m.run_id = ctx.run_id;
  // The workload and configuration the ingest was told (model, height, width, frames, steps,
  // batch, config, gpus, output_type, scope): what the class times are compared with.
  m.params = ctx.run.is_object() ? ctx.run : Json::object();
  const auto given = m.params.find("gpus");
  const int64_t gpus =
      given != m.params.end() && given->is_number_integer() ? given->get<int64_t>() : 0;
  m.ranks = world_size.value_or(gpus > 0 && gpus <= 1'000'000 ? static_cast<int>(gpus) : 1);
  if (world_size && gpus > 0 && gpus != *world_size) {
    warn(fmt::format(
        "the trace's world size is {} but the run was given as {} GPUs (--config, --ranks)",
        *world_size, gpus));
  }
  m.params["source"] = "torch-profiler";
  m.params["gpu_kernel_s"] = ClassSeconds(seconds, 1.0);
  m.params["gpu_memcpy_s"] = memcpy_s;
  m.params["kernels"] = kernels;
  // Per window: the mean over the windows that launched kernels.
  std::map<std::string_view, double> windowed;
  int used = 0;
  for (const auto& w : in_window) {
    if (w.empty()) continue;
    ++used;
    for (const auto& [cls, s] : w) windowed[cls] += s;
  }
  m.params["windows"] = used;
  if (used > 0) {
    m.params["window_kernel_s"] = ClassSeconds(windowed, used);
    const auto steps = m.params.find("steps");
    if (steps != m.params.end() && steps->is_number_integer() && steps->get<int64_t>() >= 1) {
      m.params["gpu_kernel_s_per_step"] = ClassSeconds(
          windowed, static_cast<double>(used) * static_cast<double>(steps->get<int64_t>()));
    } else {
      warn(
          "the run's workload is not given (--model, --steps, --config): no GPU time per "
          "denoising step, and nothing to compare its kernel classes with");
    }
  } else {
    warn(fmt::format("{}: GPU time by class over the whole trace only (no time per step)",
                     windows.empty() ? "no ProfilerStep#N windows"
                                     : "no kernels launched inside the ProfilerStep#N windows"));
  }
  if (rank) m.params["rank"] = *rank;
  if (Status st = m.Validate(); !st.ok()) {
    warn(fmt::format("left out the GPU time summary: {}", st.message()));
    return std::nullopt;
  }
  return m;
}

}  // namespace ditune::ingest_internal::torch_trace
