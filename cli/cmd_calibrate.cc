// `ditune calibrate ingest FILE | fit | show | compute | comm | learn | factory`: measurements into the
// store, fits from them; the subcommands' own files hold ingest and the sweeps.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/calibrate_common.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/parallel_config.h"
#include "core/config_rules.h"
#include "costmodels/calibration.h"
#include "ingest/ingest.h"
#include "store/store.h"
#include "calibration/factory.h"
#include "calibration/intervals.h"
#include "core/json_fields.h"
#include "planner/gpu_launch.h"
#include "calibration/measured_runs.h"
#include "calibration/predict.h"
#include "calibration/recalibrate.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/kernels.h"
#include "executor/microbench.h"

#include <unistd.h>

namespace ditune::cli {
namespace {

constexpr const char* kUsage =
    "usage: ditune calibrate ingest FILE [options] | fit | show | compute | comm | learn --suite FILE | factory | "
    "intervals --from FILE.json... [--memory-from FILE.json...] | accept ID   "
    "(ditune calibrate SUB --help)";

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenStoreFromArgs(const cxxopts::ParseResult& args, bool records) {
  const std::string path = args.count("db") ? args["db"].as<std::string>() : Store::DefaultPath();
  if (records && path == ":memory:") {
    return Status::InvalidArgument(
        "--db :memory:: calibrate keeps what it measures and fits in a store on disk; give the database's file "
        "path (--db or DITUNE_DB)");
  }
  return OpenStore(path);
}

std::string SegmentsText(const Fit& f) {
  if (f.kind == kFitKindMechanisms && f.params.is_object()) {
    std::string s;
    for (const auto& [k, v] : f.params.items()) {
      if (!s.empty()) s += ", ";
      s += v.is_number() ? fmt::format("{}={:.4g}", k, v.get<double>()) : fmt::format("{} {}", k, v.dump());
    }
    return s;
  }
  if (f.kind == kFitKindKernelClass && f.params.is_object()) {
    std::string s;
    for (const char* cls : {"gemm", "attention", "elementwise"}) {
      if (!f.params.contains(cls) || !f.params[cls].is_number()) continue;
      s += fmt::format("{}{} {:.2f}x", s.empty() ? "" : ", ", cls, f.params[cls].get<double>());
    }
    const bool relative = f.params.contains("relative") && f.params["relative"].is_boolean() &&
                          f.params["relative"].get<bool>();
    return fmt::format("{} the modelled device time{} ({})", s, relative ? ", relative" : "",
                       f.params.contains("origin") && f.params["origin"].is_string()
                           ? f.params["origin"].get<std::string>()
                           : "?");
  }
  if (f.params.contains("compute_scale")) {
    return fmt::format("compute scale {:.3f} (measured / modelled)", f.params["compute_scale"].get<double>());
  }
  if (f.params.contains("runtime_overhead_gb")) {
    return fmt::format("runtime overhead {:.2f} GB (measured peak over the memory model)",
                       f.params["runtime_overhead_gb"].get<double>());
  }
  if (f.params.contains("scale")) {
    return fmt::format("scale {:.3f} (measured / modelled)", f.params["scale"].get<double>());
  }
  auto model = PiecewiseLatencyModel::FromJson(f.params);
  if (!model.ok()) return "?";
  const std::string x = f.params.value("x", "");
  std::string s;
  for (const auto& seg : model->segments()) {
    if (!s.empty()) s += " | ";
    s += fmt::format("from {:.3g}: {:.3g} us + {}", seg.x_lo, seg.latency_s * 1e6,
                     x == "flops"      ? fmt::format("{:.4g} TFLOP/s", seg.rate / 1e12)
                     : x == "launches" ? fmt::format("{:.3g} us per launch", 1e6 / seg.rate)
                                       : fmt::format("{:.4g} GB/s", seg.rate / 1e9));
  }
  return s;
}

void PrintFits(const std::vector<Fit>& fits) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : fits) {
    rows.push_back({f.kind, f.key, std::to_string(f.points), fmt::format("{:.2f}%", 100 * f.mape), SegmentsText(f)});
  }
  std::cout << FormatTable({"kind", "key", "points", "MAPE", "latency + size / rate, per size range"}, rows);
}


namespace {

int FitCmd(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate fit", "Refit every model from the stored measurements");
  options.add_options()("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate fit", args.status());
  if (help) return 0;
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate fit", store.status());
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate fit", catalog.status());
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store->get(), **catalog, &skipped);
  if (!fits.ok()) return Fail("calibrate fit", fits.status());
  if (fits->empty()) {
    auto measured = (*store)->Measurements();
    if (!measured.ok()) return Fail("calibrate fit", measured.status());
    if (measured->empty()) {
      return Fail("calibrate fit", Status::InvalidArgument(fmt::format(
                                       "{} holds no measurements to fit; add some with `ditune calibrate ingest`",
                                       (*store)->path())));
    }
    std::string why;
    for (const auto& s : skipped) why += "\n  " + s;
    return Fail("calibrate fit", Status::InvalidArgument(fmt::format(
                                     "none of the {} measurement(s) in {} makes a fit{}", measured->size(),
                                     (*store)->path(),
                                     why.empty() ? std::string(" (a curve needs two sizes or more of one op, "
                                                               "collective or link)")
                                                 : ":" + why)));
  }
  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : *fits) out.push_back({{"kind", f.kind}, {"key", f.key}, {"points", f.points}, {"mape", f.mape}, {"params", f.params}});
    std::cout << nlohmann::json{{"fits", out}, {"skipped", skipped}}.dump(2) << "\n";
    return 0;
  }
  PrintFits(*fits);
  for (const auto& s : skipped) std::cerr << "not fitted: " << s << "\n";
  return 0;
}

// `ditune calibrate accept ID`: a run the refits quarantined or held counts after all (it
// was right: a new driver, a faster runtime), and the store is refitted with it.
int AcceptCmd(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate accept",
                           "Count a quarantined or held run after all, then refit (the run's id is in `calibrate fit`'s "
                           "\"not fitted\" lines)");
  options.add_options()("id", "the measurement's id", cxxopts::value<int64_t>())
      ("db", "calibration database", cxxopts::value<std::string>());
  options.parse_positional({"id"});
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate accept", args.status());
  if (help) return 0;
  if (args->count("id") == 0) {
    return Fail("calibrate accept", Status::InvalidArgument("give the measurement's id: ditune calibrate accept ID"));
  }
  const int64_t id = (*args)["id"].as<int64_t>();
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate accept", store.status());
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate accept", catalog.status());
  if (Status st = (*store)->AcceptMeasurement(id); !st.ok()) return Fail("calibrate accept", st);
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store->get(), **catalog, &skipped);
  if (!fits.ok()) return Fail("calibrate accept", fits.status());
  std::cout << fmt::format("measurement {} accepted; refitted:\n", id);
  PrintFits(*fits);
  for (const auto& s : skipped) std::cerr << "not fitted: " << s << "\n";
  return 0;
}

int Show(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate show", "The active fits, their error and point counts");
  options.add_options()("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate show", args.status());
  if (help) return 0;
  auto store = OpenStoreFromArgs(*args, /*records=*/false);
  if (!store.ok()) return Fail("calibrate show", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("calibrate show", fits.status());
  auto measurements = (*store)->Measurements();
  if (!measurements.ok()) return Fail("calibrate show", measurements.status());
  auto version = (*store)->CalibrationVersion();
  if (!version.ok()) return Fail("calibrate show", version.status());
  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : *fits) {
      out.push_back({{"id", f.id}, {"kind", f.kind}, {"key", f.key}, {"points", f.points}, {"mape", f.mape},
                     {"params", f.params}, {"measurement_ids", f.measurement_ids}, {"unix_time", f.unix_time},
                     {"factory_release", f.factory_release != 0 ? fmt::format("{:016x}", f.factory_release) : ""}});
    }
    std::cout << nlohmann::json{{"db", (*store)->path()}, {"calibration_version", *version},
                                {"measurements", measurements->size()}, {"fits", out}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} measurements, {} active fits, calibration version {}\n", (*store)->path(),
                           measurements->size(), fits->size(), *version);
  if (!fits->empty()) PrintFits(*fits);
  return 0;
}


int FactoryCmd(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate factory",
                           "Put the shipped factory calibration (data/calibration/factory.json) back into the store: "
                           "its constants and compute scales replace the active fits of the same kind and key, your "
                           "own included; measurements stay (`calibrate fit` refits from them). A store seeded by "
                           "another release is brought to the shipped one when opened; one seeded before fits were "
                           "marked with a release needs this command once");
  options.add_options()("db", "calibration database", cxxopts::value<std::string>());
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate factory", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate factory", catalog.status());
  auto fits = LoadFactoryFits(**catalog);
  if (!fits.ok()) return Fail("calibrate factory", fits.status());
  if (fits->empty()) {
    return Fail("calibrate factory", Status::InvalidArgument(fmt::format(
                                         "{} ships no factory calibration ({})", (*catalog)->data_dir().string(),
                                         kFactoryCalibrationPath)));
  }
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate factory", store.status());
  Status st = (*store)->ReplaceFits(*fits);
  if (!st.ok()) return Fail("calibrate factory", st);
  std::cout << fmt::format("{}: {} factory fits of release {:016x} active\n", (*store)->path(), fits->size(),
                           fits->front().factory_release);
  return 0;
}

// `calibrate intervals --from V.json [--from ...] [--memory-from V.json ...] --out intervals.json`:
// the 80% interval bands from the held-out residuals of `ditune validate --json` documents (the
// training suite's with --cross-validate; other tables as they are), the spread of the
// factory's compute scales, and the memory band from the published peaks.
int IntervalsCmd(int argc, char** argv) {
  cxxopts::Options options(
      "ditune calibrate intervals",
      "Learn the 80% interval bands from held-out residuals: `ditune validate --json` documents of predictions "
      "whose constants never saw the rows (the training suite with --cross-validate; other tables as they are)");
  options.add_options()("from", "a validate --json document (repeat the flag for several)",
                        cxxopts::value<std::vector<std::string>>())(
      "memory-from",
      "a validate --json document whose rows carry published peak memory (repeat the flag for several): the "
      "memory band",
      cxxopts::value<std::vector<std::string>>())(
      "out", "write the interval table here (data/calibration/intervals.json's format); default: stdout",
      cxxopts::value<std::string>());
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate intervals", args.status());
  if (help) return 0;
  if (args->count("from") == 0) {
    return Fail("calibrate intervals", Status::InvalidArgument("--from FILE.json (a `ditune validate --json` document) is required"));
  }
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate intervals", catalog.status());
  std::vector<Residual> residuals;
  std::vector<MemoryResidual> peaks;
  std::vector<std::string> sources;
  // Each file of `flag`, read by `take` into `into`, named in the sources with its count.
  auto read_all = [&](const char* flag, auto take, auto& into, const char* what) -> Status {
    if (args->count(flag) == 0) return Status::Ok();
    for (const auto& path : (*args)[flag].as<std::vector<std::string>>()) {
      DITUNE_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
      DITUNE_ASSIGN_OR_RETURN(auto got, take(j, path));
      into.insert(into.end(), got.begin(), got.end());
      sources.push_back(fmt::format("{} ({} {})", std::filesystem::path(path).filename().string(), got.size(), what));
    }
    return Status::Ok();
  };
  if (Status s = read_all("from", ResidualsFromValidateJson, residuals, "residuals"); !s.ok()) {
    return Fail("calibrate intervals", s);
  }
  if (Status s = read_all("memory-from", MemoryResidualsFromValidateJson, peaks, "peaks"); !s.ok()) {
    return Fail("calibrate intervals", s);
  }
  auto factory = LoadFactoryFits(**catalog);
  if (!factory.ok()) return Fail("calibrate intervals", factory.status());
  const IntervalTable table = LearnIntervals(residuals, *factory, sources, peaks);
  const std::string text = IntervalTableJson(table).dump(2) + "\n";
  if (args->count("out")) {
    if (Status s = WriteOutputFile("out", (*args)["out"].as<std::string>(), text); !s.ok()) {
      return Fail("calibrate intervals", s);
    }
    for (const auto& b : table.bands) {
      std::cout << fmt::format("{}: n={} 80% of published values within {:+.1f}% .. {:+.1f}% of the prediction\n",
                               b.runtime_class, b.n, 100 * (std::exp(b.lo) - 1), 100 * (std::exp(b.hi) - 1));
    }
    std::cout << fmt::format("no compute scale: widened by x{:.2f} either way ({} published scales)\n",
                             std::exp(table.scale_spread), table.scales);
    if (table.source_publishers >= 2) {
      std::cout << fmt::format(
          "a source never seen: bands widened x{:.2f} about their middle (each of {} publishers judged by the others' "
          "bands, each counted once: {:.0f}% inside on average before, 80% after)\n",
          table.source_widening, table.source_publishers, 100 * table.source_coverage_before);
    }
    if (table.memory) {
      std::cout << fmt::format("memory: n={} 80% of published peaks within {:+.1f}% .. {:+.1f}% of the prediction\n",
                               table.memory->n, 100 * (std::exp(table.memory->lo) - 1),
                               100 * (std::exp(table.memory->hi) - 1));
    } else if (!peaks.empty()) {
      std::cout << fmt::format("memory: {} peaks, fewer than {}: no memory band\n", peaks.size(),
                               kMinIntervalResiduals);
    }
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace

int RunCalibrate(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage << "\n";
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "ingest") return CalibrateIngest(argc - 1, argv + 1);
  if (sub == "fit") return FitCmd(argc - 1, argv + 1);
  if (sub == "show") return Show(argc - 1, argv + 1);
  if (sub == "accept") return AcceptCmd(argc - 1, argv + 1);
  if (sub == "compute") return CalibrateCompute(argc - 1, argv + 1);
  if (sub == "comm") return CalibrateComm(argc - 1, argv + 1);
  if (sub == "learn") return RunCalibrateLearn(argc - 1, argv + 1);
  if (sub == "factory") return FactoryCmd(argc - 1, argv + 1);
  if (sub == "intervals") return IntervalsCmd(argc - 1, argv + 1);
  if (sub == "-h" || sub == "--help") {
    std::cout << kUsage << "\n";
    return 0;
  }
  std::cerr << "ditune calibrate: unknown subcommand '" << sub << "'\n" << kUsage << "\n";
  return 2;
}


}  // namespace ditune::cli
