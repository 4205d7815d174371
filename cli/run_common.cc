#include "cli/run_common.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planner/plan.h"

namespace ditune::cli {

StatusOr<ParallelConfig> ReadRunConfig(const cxxopts::ParseResult& args, const Workload& workload) {
  if (args.count("config")) return ParseParallelConfig(args["config"].as<std::string>());
  if (!args.count("plan")) return Status::InvalidArgument("give --config SPEC or --plan FILE");
  std::ifstream in(args["plan"].as<std::string>());
  if (!in) return Status::NotFound(fmt::format("cannot open plan '{}'", args["plan"].as<std::string>()));
  std::stringstream ss;
  ss << in.rdbuf();
  return PlanConfigFromJson(ss.str(), "--plan " + args["plan"].as<std::string>(), workload);
}

std::vector<ProfileLine> ProfileRows(const std::vector<exec::KernelProfileRow>& measured,
                                     const std::map<std::string, Seconds>& modelled) {
  std::vector<ProfileLine> rows;
  for (const auto& m : measured) {
    ProfileLine l{m.kernel, m.calls, m.seconds, m.flops, m.bytes, std::nullopt};
    if (auto it = modelled.find(m.kernel); it != modelled.end()) l.modelled_s = it->second.value();
    rows.push_back(std::move(l));
  }
  for (const auto& entry : modelled) {
    const auto& kernel = entry.first;  // named: the lambda captures it (clang 14 takes no bindings)
    const bool ran = std::any_of(measured.begin(), measured.end(), [&](const auto& m) { return m.kernel == kernel; });
    if (!ran && entry.second.value() > 0) rows.push_back({kernel, 0, 0, 0, 0, entry.second.value()});
  }
  return rows;
}

void PrintProfile(const std::vector<exec::KernelProfileRow>& measured, const std::map<std::string, Seconds>& modelled,
                  double loop_s, int rank, std::ostream& os) {
  os << fmt::format("kernel profile of rank {}: one more loop with every kernel timed on the device ({:.4f} s){}\n",
                    rank, loop_s, modelled.empty() ? "" : "; modelled: each kernel's fitted curve, no engine scale");
  os << fmt::format("{:<16} {:>7} {:>12} {:>7} {:>16} {:>12} {:>8}\n", "kernel", "calls", "measured_ms", "share",
                    "achieved", "modelled_ms", "error");
  double kernels = 0, priced = 0;
  for (const auto& m : measured) kernels += m.seconds;
  for (const auto& l : ProfileRows(measured, modelled)) {
    std::string achieved = "-";
    if (l.measured_s > 0 && l.flops > 0) {
      achieved = fmt::format("{:.3f} TFLOP/s", l.flops / l.measured_s / 1e12);
    } else if (l.measured_s > 0 && l.bytes > 0) {
      achieved = fmt::format("{:.2f} GB/s", l.bytes / l.measured_s / 1e9);
    }
    std::string model = "-", error = "-";
    if (l.modelled_s) {
      priced += *l.modelled_s;
      model = fmt::format("{:.3f}", 1e3 * *l.modelled_s);
      if (l.measured_s > 0) error = fmt::format("{:+.1f}%", 100 * (*l.modelled_s / l.measured_s - 1));
    }
    os << fmt::format("{:<16} {:>7} {:>12.3f} {:>6.1f}% {:>16} {:>12} {:>8}\n", l.kernel, l.calls, 1e3 * l.measured_s,
                      kernels > 0 ? 100 * l.measured_s / kernels : 0.0, achieved, model, error);
  }
  os << fmt::format("{:<16} {:>7} {:>12.3f} {:>7} {:>16} {:>12} {:>8}\n", "kernels", "", 1e3 * kernels, "", "",
                    modelled.empty() ? "-" : fmt::format("{:.3f}", 1e3 * priced),
                    modelled.empty() || kernels <= 0 ? "-" : fmt::format("{:+.1f}%", 100 * (priced / kernels - 1)));
  os << fmt::format("between kernels: {:.3f} ms of the loop (launch gaps, host work, waiting on transfers)\n",
                    1e3 * std::max(0.0, loop_s - kernels));
}


}  // namespace ditune::cli
