// `ditune calibrate learn --suite FILE.csv [--suite FILE2.csv ...] [--out FILE.json] [--db PATH]
// [--json]`: the global mechanism constants learned on training suites, read as one
// (calibration/learn.h).
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/output_file.h"
#include "costmodels/calibration.h"
#include "calibration/factory.h"
#include "calibration/learn.h"

namespace ditune::cli {

int RunCalibrateLearn(int argc, char** argv) {
  cxxopts::Options options(
      "ditune calibrate learn",
      "Learn the global mechanism constants (eager host overhead, framework ops per parallel method, collective "
      "efficiency per link class, VAE scales) on every row of a training suite; never anything per group, row or "
      "model. Prints the constants and the suite's error before and after.");
  options.add_options()
      ("suite", "training suite CSV (the validate format); repeat it (or separate by commas) to learn on several "
                "as one", cxxopts::value<std::vector<std::string>>())
      ("out", "write the factory calibration document (data/calibration/factory.json's format)",
       cxxopts::value<std::string>())
      ("db", "also record the constants and the suite's (GPU, model) scales in this store as active fits",
       cxxopts::value<std::string>())
      ("start", "start the search from these constants (a JSON object of them, e.g. a factory document's "
                "\"mechanisms\"); default: the code's defaults", cxxopts::value<std::string>())
      ("min-gain", "the least fraction of the loss a constant's move must gain to be taken (default 0.04: a "
                   "constant the rows barely see stays at its default)", cxxopts::value<double>())
      ("json", "the factory calibration document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate learn", args.status());
  if (help) return 0;
  if (args->count("suite") == 0) return Fail("calibrate learn", Status::InvalidArgument("--suite FILE.csv is required"));
  const std::vector<std::string> paths = (*args)["suite"].as<std::vector<std::string>>();
  // A bad --out is refused before the search, not after it.
  if (args->count("out")) {
    if (Status st = CheckWritable((*args)["out"].as<std::string>(), "--out"); !st.ok()) return Fail("calibrate learn", st);
  }
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate learn", catalog.status());
  auto rows = LoadSuiteFiles(paths, **catalog);
  if (!rows.ok()) return Fail("calibrate learn", rows.status());
  std::vector<std::string> left_out;
  *rows = PricedRows(std::move(*rows), &left_out);
  for (const auto& line : left_out) std::cerr << "ditune calibrate learn: left out " << line << "\n";
  LearnOptions opt;
  if (args->count("min-gain")) opt.min_gain = (*args)["min-gain"].as<double>();
  if (args->count("start")) {
    const std::string start = (*args)["start"].as<std::string>();
    std::ifstream f(start, std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!f || j.is_discarded()) {
      return Fail("calibrate learn", Status::InvalidArgument(fmt::format("--start '{}': cannot read a JSON document", start)));
    }
    auto m = MechanismsFromJson(j.contains("mechanisms") ? j["mechanisms"] : j);
    if (!m.ok()) return Fail("calibrate learn", m.status().WithContext(fmt::format("--start '{}'", start)));
    opt.start = *m;
  }
  // Learned on the catalog alone: constants that ship must not depend on one machine's store.
  auto learned = LearnMechanisms(*rows, **catalog, {}, opt);
  if (!learned.ok()) return Fail("calibrate learn", learned.status());
  std::string name;
  for (const auto& p : paths) name += (name.empty() ? "" : " + ") + std::filesystem::path(p).filename().string();
  const nlohmann::json doc = FactoryCalibrationJson(*learned, name, *rows);
  if (args->count("out")) {
    const std::string out = (*args)["out"].as<std::string>();
    if (Status st = WriteFileWhole(out, doc.dump(2) + "\n", "--out"); !st.ok()) return Fail("calibrate learn", st);
  }
  if (args->count("db")) {
    auto store = OpenStore((*args)["db"].as<std::string>());
    if (!store.ok()) return Fail("calibrate learn", store.status());
    auto fits = FactoryFits(doc);
    if (!fits.ok()) return Fail("calibrate learn", fits.status());
    Status st = (*store)->ReplaceFits(*fits);
    if (!st.ok()) return Fail("calibrate learn", st);
  }
  if (args->count("json")) {
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& p : MechanismParams()) {
    table.push_back({p.name, fmt::format("{:.4g}", learned->start.*p.member),
                     fmt::format("{:.4g}", learned->mechanisms.*p.member), p.what});
  }
  std::cout << FormatTable({"constant", "default", "learned", "what"}, table);
  auto line = [](const char* when, const SuiteSummary& s, double loss) {
    return fmt::format("{}: rows={} median_ape={:.3f} p90_ape={:.3f} oom_agree={}/{} no_fit={} choice={}/{} loss={:.4f}\n",
                       when, s.rows, s.median_ape, s.p90_ape, s.oom_agree, s.oom_rows, s.false_oom, s.choice_pass,
                       s.choice_sets, loss);
  };
  std::cout << line("before", learned->before, learned->loss_before);
  std::cout << line("after", learned->after, learned->loss_after);
  std::string suites;
  for (const auto& p : paths) suites += " --suite " + p;
  std::cout << fmt::format("{} evaluations of the suite; in-sample figures: `ditune validate{} --cross-validate` "
                           "measures generalisation\n",
                           learned->evaluations, suites);
  return 0;
}

}  // namespace ditune::cli
