// `ditune serve WORKLOAD CLUSTER (--rate R [--mix SPEC] [--duration S] [--seed N] | --trace FILE.csv)
//  (--layout SPEC | --slo SECONDS [--percentile P]) [--policy P] [--max-batch B] [--runtime R]
//  [--json] [--plot FILE.svg] [--csv FILE] [--db PATH]`.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "serving/report.h"
#include "serving/serve.h"

namespace ditune::cli {
namespace {

using namespace ditune::serving;  // NOLINT: the command is a thin layer over this library

// The query the flags describe (without the layout).
StatusOr<ServeQuery> ReadQuery(const cxxopts::ParseResult& args, const Catalog& catalog, const std::vector<Fit>* fits) {
  ServeQuery q;
  DITUNE_ASSIGN_OR_RETURN(q.pricing.base, ReadWorkload(args, catalog));
  DITUNE_ASSIGN_OR_RETURN(ClusterSpec spec, ReadClusterSpec(args));
  DITUNE_ASSIGN_OR_RETURN(q.pricing.cluster, ResolveCluster(spec, catalog));
  q.pricing.catalog = &catalog;
  q.pricing.fits = fits;
  DITUNE_ASSIGN_OR_RETURN(q.pricing.plan.runtime, ReadRuntime(args, catalog, /*any_allowed=*/false));
  DITUNE_ASSIGN_OR_RETURN(q.queue.policy, ParsePolicy(args["policy"].as<std::string>()));
  q.queue.max_batch = args["max-batch"].as<int>();
  if (q.queue.max_batch < 1 || q.queue.max_batch > 64) {
    return Status::InvalidArgument(fmt::format("--max-batch {}: give an integer from 1 to 64", q.queue.max_batch));
  }
  const RequestShape base = ShapeOf(q.pricing.base);
  const bool rate = args.count("rate") > 0, trace = args.count("trace") > 0;
  if (rate == trace) return Status::InvalidArgument("give exactly one of --rate R (Poisson arrivals) or --trace FILE.csv");
  if (trace) {
    for (const char* f : {"mix", "duration", "seed"}) {
      if (args.count(f)) return Status::InvalidArgument(fmt::format("--{} is for --rate; a trace has its own arrivals", f));
    }
    DITUNE_ASSIGN_OR_RETURN(RequestStream s, LoadRequestTraceFile(args["trace"].as<std::string>(), base, catalog));
    q.source.rate_rps = MeanRate(s);
    q.source.trace = std::move(s);
  } else {
    q.source.rate_rps = args["rate"].as<double>();
    q.source.duration = Seconds(args["duration"].as<double>());
    q.source.seed = args["seed"].as<uint64_t>();
    if (args.count("mix")) {
      DITUNE_ASSIGN_OR_RETURN(q.source.mix, ParseMix(args["mix"].as<std::string>(), base));
    } else {
      q.source.mix = {{base, 1}};
    }
    DITUNE_RETURN_IF_ERROR(PoissonRequests(q.source.mix, q.source.rate_rps, q.source.duration, 1).status());
    for (const auto& m : q.source.mix) {
      DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(m.shape.model));
      if (auto g = ComputeTokenGeometry(*model, WorkloadOf(m.shape, q.pricing.base)); !g.ok()) {
        return Status::InvalidArgument(fmt::format("--mix {}: {}", ShapeLabel(m.shape), g.status().message()));
      }
    }
  }
  if (args.count("slo")) {
    const double slo = args["slo"].as<double>();
    if (!(slo > 0)) return Status::InvalidArgument(fmt::format("--slo {}: give the latency objective in seconds, > 0", slo));
    q.slo = Seconds(slo);
  }
  q.percentile = args["percentile"].as<double>();
  if (!(q.percentile > 0 && q.percentile <= 100)) {
    return Status::InvalidArgument(fmt::format("--percentile {}: give a percentile in (0, 100], e.g. 99", q.percentile));
  }
  return q;
}

}  // namespace

int RunServe(int argc, char** argv) {
  cxxopts::Options options("ditune serve", "Serve a request stream on a layout of replicas; find the fewest GPUs for an SLO");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  AddRuntimeOptions(options, /*any_allowed=*/false);
  options.add_options("serve")
      ("rate", "Poisson arrivals, requests per second", cxxopts::value<double>())
      ("mix", "request shapes and weights for --rate: HxW[xFRAMES][@STEPS][:WEIGHT],...", cxxopts::value<std::string>())
      ("duration", "seconds of arrivals for --rate", cxxopts::value<double>()->default_value("3600"))
      ("seed", "random seed for --rate", cxxopts::value<uint64_t>()->default_value("1"))
      ("trace", "arrivals from a CSV: arrival_s[,model,height,width,frames,steps]", cxxopts::value<std::string>())
      ("layout", "replicas, e.g. 4x(ulysses=2) or 2x(ulysses=2)+4x()", cxxopts::value<std::string>())
      ("slo", "latency objective in seconds: with --layout, whether it is met and the highest rate that meets it; "
              "alone, the fewest GPUs and the layout that meet it",
       cxxopts::value<double>())
      ("percentile", "the latency percentile the SLO is on", cxxopts::value<double>()->default_value("99"))
      ("policy", "fcfs | size-aware | dynamic", cxxopts::value<std::string>()->default_value("fcfs"))
      ("max-batch", "requests of one shape a replica serves together, at most", cxxopts::value<int>()->default_value("1"))
      ("csv", "write every request as CSV", cxxopts::value<std::string>())
      ("plot", "draw latency and utilisation against offered load (SVG)", cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("serve", args.status());
  if (help) return 0;
  if (!args->count("layout") && !args->count("slo")) {
    return Fail("serve", Status::InvalidArgument("give --layout SPEC (serve on it) or --slo SECONDS (search layouts), or both"));
  }
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("serve", catalog.status());
  auto store = OpenPricingStore(*args);
  if (!store.ok()) return Fail("serve", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("serve", fits.status());
  auto query = ReadQuery(*args, **catalog, &*fits);
  if (!query.ok()) return Fail("serve", query.status());
  const ServeQuery& q = *query;

  std::optional<Evaluation> eval;
  std::optional<SearchAnswer> search;
  std::optional<double> max_rate;
  if (args->count("layout")) {
    auto layout = ParseLayout((*args)["layout"].as<std::string>());
    if (!layout.ok()) return Fail("serve", layout.status());
    StatusOr<Evaluation> e = Status::Ok();
    if (q.queue.policy == Policy::kDynamic) {
      std::vector<ParallelConfig> types;
      for (const auto& g : layout->groups) types.push_back(g.config);
      e = ServeDynamic(q, types, layout->gpus());
    } else {
      e = ServeLayout(q, *layout);
    }
    if (!e.ok()) return Fail("serve", e.status());
    eval = std::move(*e);
    if (q.slo) {
      auto r = MaxRateWithinSlo(q, *eval);
      if (!r.ok()) return Fail("serve", r.status());
      max_rate = *r;
    }
  } else {
    auto a = SearchLayouts(q);
    if (!a.ok()) return Fail("serve", a.status());
    search = std::move(*a);
    if (search->best) eval = *search->best;
    max_rate = search->best_max_rate_rps;
  }

  if (eval && args->count("csv")) {
    if (Status st = WriteOutputFile("csv", (*args)["csv"].as<std::string>(), RequestsCsv(*eval)); !st.ok()) return Fail("serve", st);
  }
  if (eval && args->count("plot")) {
    // The layout, or the search's finalists: the candidates side by side.
    std::vector<const Evaluation*> shown = {&*eval};
    if (search) {
      shown.clear();
      for (const Evaluation& e : search->finalists) shown.push_back(&e);
    }
    std::vector<LoadCurve> curves;
    for (const Evaluation* e : shown) {
      auto curve = SweepLoad(q, *e);
      if (!curve.ok()) return Fail("serve", curve.status());
      curves.push_back(std::move(*curve));
    }
    const Workload& w = q.pricing.base;
    const std::string title = fmt::format("{} on {} x {}: latency and utilisation against load", w.model_id,
                                          q.pricing.cluster.gpus(), q.pricing.cluster.gpu->id);
    if (Status st = WriteOutputFile("plot", (*args)["plot"].as<std::string>(),
                              LoadSvg(curves, q.slo ? std::optional<double>(q.slo->value()) : std::nullopt, q.percentile,
                                      q.source.rate_rps, title));
        !st.ok()) {
      return Fail("serve", st);
    }
  }
  if (args->count("json")) {
    nlohmann::json out = eval ? EvaluationJson(q, *eval) : nlohmann::json::object();
    if (max_rate) out["max_rate_within_slo_rps"] = *max_rate;
    if (search) {
      nlohmann::json sizes = nlohmann::json::array();
      for (const auto& c : search->size_configs) sizes.push_back(ToString(c));
      nlohmann::json finalists = nlohmann::json::array();
      for (const auto& f : search->finalists) finalists.push_back(EvaluationJson(q, f, false));
      out["search"] = {{"answer", search->best ? nlohmann::json({{"gpus", search->best->gpus}, {"layout", search->best->layout}})
                                               : nlohmann::json(nullptr)},
                       {"why_none", search->why_none}, {"size_configs", sizes}, {"layouts", search->layouts},
                       {"unstable", search->unstable}, {"considered", search->considered},
                       {"finalists", finalists}};
    }
    std::cout << out.dump(2) << "\n";
  } else {
    if (search) {
      std::cout << fmt::format("searched {} layouts ({} unable to hold {:.3g} requests/s)\n", search->layouts,
                               search->unstable, q.source.rate_rps);
      // The last GPU counts tried are the informative ones; --json has every line.
      const size_t shown = std::min<size_t>(search->considered.size(), 24);
      if (shown < search->considered.size()) {
        std::cout << fmt::format("  ({} earlier lines in --json)\n", search->considered.size() - shown);
      }
      for (size_t i = search->considered.size() - shown; i < search->considered.size(); ++i) {
        std::cout << "  " << search->considered[i] << "\n";
      }
      if (search->best) {
        std::cout << fmt::format("\nfewest GPUs for p{:g} <= {:g} s at {:.3g} requests/s: {} GPUs as {}\n", q.percentile,
                                 q.slo->value(), q.source.rate_rps, search->best->gpus, search->best->layout);
      }
    }
    if (eval) std::cout << EvaluationText(q, *eval);
    if (max_rate) std::cout << fmt::format("highest rate with p{:g} <= {:g} s: {:.3g} requests/s\n", q.percentile, q.slo->value(), *max_rate);
  }
  if (search && !search->best) return Fail("serve", Status::Infeasible(search->why_none));
  return 0;
}

}  // namespace ditune::cli
