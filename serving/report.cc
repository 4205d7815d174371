#include "serving/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/text.h"

namespace ditune::serving {
namespace {

nlohmann::json SecondsOrNull(bool stable, Seconds s) {
  return stable ? nlohmann::json(s.value()) : nlohmann::json(nullptr);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

}  // namespace

nlohmann::json EvaluationJson(const ServeQuery& q, const Evaluation& e, bool with_requests) {
  const ServeSummary& s = e.summary;
  nlohmann::json summary = {
      {"requests", s.requests},
      {"rate_rps", s.rate_rps},
      {"capacity_rps", s.capacity_rps},
      {"offered_load", std::isfinite(s.offered_load) ? nlohmann::json(s.offered_load) : nlohmann::json(nullptr)},
      {"stable", s.stable},
      {"p50_s", SecondsOrNull(s.stable, s.p50)},
      {"p95_s", SecondsOrNull(s.stable, s.p95)},
      {"p99_s", SecondsOrNull(s.stable, s.p99)},
      {"percentile", s.percentile},
      {"at_percentile_s", SecondsOrNull(s.stable, s.at_percentile)},
      {"mean_latency_s", SecondsOrNull(s.stable, s.mean_latency)},
      {"mean_queue_s", SecondsOrNull(s.stable, s.mean_queue)},
      {"max_queue_s", SecondsOrNull(s.stable, s.max_queue)},
      {"mean_service_s", s.mean_service.value()},
      {"utilisation", s.utilisation},
      {"goodput_rps", s.goodput_rps},
      {"within_slo", s.within_slo},
      {"horizon_s", s.horizon.value()},
  };
  if (!s.stable) summary["unstable_reason"] = s.unstable_reason;
  summary["slo_s"] = q.slo ? nlohmann::json(q.slo->value()) : nlohmann::json(nullptr);
  if (q.slo) summary["meets_slo"] = s.meets_slo();
  nlohmann::json out = {
      {"layout", e.layout},
      {"gpus", e.gpus},
      {"policy", PolicyName(e.layout.starts_with("dynamic") ? Policy::kDynamic : q.queue.policy)},
      {"max_batch", q.queue.max_batch},
      {"replicas", e.server_labels},
      {"summary", summary},
  };
  nlohmann::json shapes = nlohmann::json::array();
  for (int sh = 0; sh < static_cast<int>(e.stream.shapes.size()); ++sh) {
    const RequestShape& r = e.stream.shapes[sh];
    nlohmann::json service = nlohmann::json::object();
    for (int t = 0; t < static_cast<int>(e.types.size()); ++t) {
      service[Label(e.types[t])] =
          e.table.CanServe(sh, t) ? nlohmann::json(e.table.Time(sh, t).value()) : nlohmann::json(e.table.Why(sh, t));
    }
    shapes.push_back({{"model", r.model}, {"height", r.height}, {"width", r.width}, {"frames", r.frames},
                      {"steps", r.steps}, {"service_s", service}});
  }
  out["shapes"] = shapes;
  if (with_requests) {
    nlohmann::json reqs = nlohmann::json::array();
    for (const Request& r : e.stream.requests) {
      const Served& x = e.run.served[r.id];
      reqs.push_back({{"id", r.id},
                      {"arrival_s", r.arrival.value()},
                      {"start_s", x.start.value()},
                      {"finish_s", x.finish.value()},
                      {"replica", x.server},
                      {"service_s", (x.finish - x.start).value()},
                      {"batch", x.batch},
                      {"shape", r.shape}});
    }
    out["requests"] = std::move(reqs);
  }
  return out;
}

std::string EvaluationText(const ServeQuery& q, const Evaluation& e) {
  const ServeSummary& s = e.summary;
  std::string out = fmt::format("layout {} ({} GPUs, {} {})\n", e.layout, e.gpus, e.servers.size(),
                                e.layout.starts_with("dynamic") ? "placements" : "replicas");
  if (!e.layout.starts_with("dynamic")) {
    for (size_t i = 0; i < e.server_labels.size(); ++i) out += fmt::format("  replica {}: {}\n", i, e.server_labels[i]);
  }
  for (int sh = 0; sh < static_cast<int>(e.stream.shapes.size()); ++sh) {
    out += fmt::format("  service {}:", ShapeLabel(e.stream.shapes[sh]));
    for (int t = 0; t < static_cast<int>(e.types.size()); ++t) {
      out += e.table.CanServe(sh, t) ? fmt::format(" {} {:.3g} s;", Label(e.types[t]), e.table.Time(sh, t).value())
                                     : fmt::format(" {} cannot ({});", Label(e.types[t]), e.table.Why(sh, t));
    }
    out += "\n";
  }
  out += fmt::format("{} requests at {:.3g}/s; capacity {:.3g}/s (offered load {:.2f})\n", s.requests, s.rate_rps,
                     s.capacity_rps, s.offered_load);
  if (!s.stable) {
    out += fmt::format("UNSTABLE: {}; latency percentiles would only measure the length of the run\n",
                       s.unstable_reason);
  } else {
    out += fmt::format("latency p50 {:.3g} s  p95 {:.3g} s  p99 {:.3g} s", s.p50.value(), s.p95.value(),
                       s.p99.value());
    if (s.percentile != 50 && s.percentile != 95 && s.percentile != 99) {
      out += fmt::format("  p{:g} {:.3g} s", s.percentile, s.at_percentile.value());
    }
    out += fmt::format("\nqueue mean {:.3g} s  max {:.3g} s; service mean {:.3g} s\n", s.mean_queue.value(),
                       s.max_queue.value(), s.mean_service.value());
  }
  out += fmt::format("utilisation {:.1f}%  goodput {:.3g} requests/s", 100 * s.utilisation, s.goodput_rps);
  if (q.slo) {
    out += fmt::format(" within {:g} s ({:.1f}% of requests)\n", q.slo->value(),
                       s.requests ? 100.0 * s.within_slo / s.requests : 0);
    out += fmt::format("SLO p{:g} <= {:g} s: {}\n", s.percentile, q.slo->value(), s.meets_slo() ? "met" : "MISSED");
  } else {
    out += "\n";
  }
  return out;
}

std::string RequestsCsv(const Evaluation& e) {
  std::string out = "id,arrival_s,start_s,finish_s,queue_s,service_s,latency_s,replica,batch,shape\n";
  for (const Request& r : e.stream.requests) {
    const Served& x = e.run.served[r.id];
    out += fmt::format("{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{},{},{}\n", r.id, r.arrival.value(),
                       x.start.value(), x.finish.value(), (x.start - r.arrival).value(), (x.finish - x.start).value(),
                       (x.finish - r.arrival).value(), x.server, x.batch,
                       CsvField(ShapeLabel(e.stream.shapes[r.shape])));
  }
  return out;
}

std::string LoadSvg(const std::vector<LoadCurve>& curves, std::optional<double> slo_s, double percentile,
                    std::optional<double> rate_rps, const std::string& title) {
  constexpr int kW = 1000, kH = 430, kTop = 50, kPlotH = 300, kPlotW = 380;
  constexpr int kX0[2] = {80, 570};
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica, Arial, "
      "sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n",
      kW, kH + 40 + 18 * static_cast<int>(curves.size()), kW / 2, EscapeHtml(title));
  double max_rate = 0, max_latency = 0;
  for (const auto& c : curves) {
    for (const auto& p : c.points) {
      max_rate = std::max(max_rate, p.rate_rps);
      if (p.stable) max_latency = std::max(max_latency, p.at_percentile.value());
    }
  }
  if (rate_rps) max_rate = std::max(max_rate, *rate_rps);
  if (slo_s) max_latency = std::max(max_latency, *slo_s * 1.1);
  if (max_rate <= 0 || max_latency <= 0) {
    return svg + "<text x=\"40\" y=\"120\" font-size=\"16\">no stable point to draw</text>\n</svg>\n";
  }
  max_rate *= 1.05;
  max_latency *= 1.1;
  auto x_of = [&](int panel, double rate) { return kX0[panel] + kPlotW * rate / max_rate; };
  auto y_lat = [&](double s) { return kTop + kPlotH * (1 - s / max_latency); };
  auto y_util = [&](double u) { return kTop + kPlotH * (1 - u); };
  const char* ylabels[2] = {"latency (s)", "GPU utilisation"};
  for (int panel = 0; panel < 2; ++panel) {
    const int x0 = kX0[panel];
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", x0,
                       kTop, kPlotW, kPlotH);
    for (int i = 0; i <= 4; ++i) {
      const double r = max_rate / 1.05 * i / 4;
      const double x = x_of(panel, r);
      svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                         "<text x=\"{0}\" y=\"{3}\" font-size=\"11\" text-anchor=\"middle\">{4:.3g}</text>\n",
                         x, kTop, kTop + kPlotH, kTop + kPlotH + 15, r);
      const double v = panel == 0 ? max_latency / 1.1 * i / 4 : 0.25 * i;
      const double y = panel == 0 ? y_lat(v) : y_util(v);
      svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>"
                         "<text x=\"{3}\" y=\"{4}\" font-size=\"11\" text-anchor=\"end\">{5}</text>\n",
                         x0, y, x0 + kPlotW, x0 - 5, y + 4,
                         panel == 0 ? fmt::format("{:.3g}", v) : fmt::format("{:.0f}%", 100 * v));
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" text-anchor=\"middle\">offered load "
                       "(requests/s)</text>\n",
                       x0 + kPlotW / 2, kTop + kPlotH + 34);
    svg += fmt::format("<text x=\"{0}\" y=\"{1}\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 {0} "
                       "{1})\">{2}</text>\n",
                       x0 - 48, kTop + kPlotH / 2, ylabels[panel]);
    if (rate_rps) {
      svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#555\" stroke-dasharray=\"2,3\"/>"
                         "<text x=\"{3}\" y=\"{4}\" font-size=\"11\">rate</text>\n",
                         x_of(panel, *rate_rps), kTop, kTop + kPlotH, x_of(panel, *rate_rps) + 3, kTop + 12);
    }
  }
  if (slo_s) {
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#c00\" stroke-dasharray=\"6,3\"/>"
                       "<text x=\"{3}\" y=\"{4}\" font-size=\"11\" fill=\"#c00\">SLO {5:g} s</text>\n",
                       kX0[0], y_lat(*slo_s), kX0[0] + kPlotW, kX0[0] + 4, y_lat(*slo_s) - 4, *slo_s);
  }
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string p50, tail, util;
    for (const auto& p : curves[i].points) {
      if (p.stable) {
        p50 += fmt::format("{:.1f},{:.1f} ", x_of(0, p.rate_rps), y_lat(p.p50.value()));
        tail += fmt::format("{:.1f},{:.1f} ", x_of(0, p.rate_rps), y_lat(p.at_percentile.value()));
      }
      util += fmt::format("{:.1f},{:.1f} ", x_of(1, p.rate_rps), y_util(std::min(1.0, p.utilisation)));
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
                       "stroke-dasharray=\"5,4\"/>\n",
                       p50, color);
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", tail, color);
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", util, color);
    const int ly = kTop + kPlotH + 60 + 18 * static_cast<int>(i);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\" font-size=\"12\">{} (capacity {:.3g}/s; solid p{:g}, dashed p50)"
                       "</text>\n",
                       kX0[0], ly - 4, color, kX0[0] + 20, ly, EscapeHtml(curves[i].layout), curves[i].capacity_rps,
                       percentile);
  }
  return svg + "</svg>\n";
}

}  // namespace ditune::serving
