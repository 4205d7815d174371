#include "planner/whatif.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/text.h"

namespace ditune {
namespace {

std::string SeriesName(const WhatIfRow& r) {
  std::string s = fmt::format("{} ({}", r.gpu, r.intra);
  if (r.inter_swept) s += "/" + r.inter;
  s += fmt::format(", {}x{}", r.height, r.width);
  if (r.frames > 1) s += fmt::format("x{}", r.frames);
  return s + ")";
}

}  // namespace

StatusOr<std::vector<WhatIfRow>> RunWhatIf(const Catalog& catalog, const WhatIfQuery& q, const std::vector<Fit>& fits) {
  if (q.gpus.empty() || q.counts.empty()) return Status::InvalidArgument("--gpu and --gpus need at least one value");
  std::vector<std::pair<int, int>> sizes = q.sizes;
  if (sizes.empty()) sizes = {{q.workload.height, q.workload.width}};
  std::vector<int> frames = q.frames;
  if (frames.empty()) frames = {q.workload.frames};
  std::vector<WhatIfRow> rows;
  for (const auto& gpu_id : q.gpus) {
    DITUNE_ASSIGN_OR_RETURN(const GpuSpec* gpu, catalog.Gpu(gpu_id));
    const std::vector<std::string> intras = q.intras.empty() ? std::vector<std::string>{gpu->default_intra} : q.intras;
    for (const auto& intra : intras) {
      for (const auto& inter_choice : q.inters.empty() ? std::vector<std::string>{""} : q.inters) {
        for (auto [h, w] : sizes) {
          for (int f : frames) {
            Workload wl = q.workload;
            wl.height = h;
            wl.width = w;
            wl.frames = f;
            DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(wl.model_id));
            DITUNE_RETURN_IF_ERROR(ComputeTokenGeometry(*model, wl).status());
            for (int n : q.counts) {
              WhatIfRow row;
              row.gpu = gpu_id;
              row.intra = intra;
              row.gpus = n;
              row.height = h;
              row.width = w;
              row.frames = f;
              ClusterSpec spec{gpu_id, n};
              spec.intra_id = intra;
              const bool multi = n > gpu->max_gpus_per_node;
              spec.inter_id = !inter_choice.empty() ? inter_choice : (multi ? "ib-ndr" : "");
              std::vector<std::string> notes;
              if (multi && inter_choice.empty()) notes.push_back("assumed ib-ndr between nodes");
              if (multi) {
                // Whole nodes: the most GPUs per node that divides the count (12 of 8 per
                // node: 2 nodes of 6).
                spec.gpus_per_node = gpu->max_gpus_per_node;
                while (n % spec.gpus_per_node != 0) --spec.gpus_per_node;
                if (spec.gpus_per_node < gpu->max_gpus_per_node) {
                  notes.push_back(fmt::format("{} nodes of {} GPUs", n / spec.gpus_per_node, spec.gpus_per_node));
                }
              }
              for (const auto& note : notes) row.note += (row.note.empty() ? "" : "; ") + note;
              auto cluster = ResolveCluster(spec, catalog);
              if (!cluster.ok()) {
                // One count that no cluster of this GPU makes does not stop the sweep.
                row.note = cluster.status().message();
                rows.push_back(std::move(row));
                continue;
              }
              row.inter = cluster->spec.inter_id;
              row.inter_swept = !inter_choice.empty();
              row.nodes = cluster->nodes();
              PlanOptions po = q.plan;
              po.top_k = 1;
              auto plan = po.runtime == kRuntimeAny ? MakePlanAny(catalog, wl, *cluster, fits, po)
                                                         : MakePlan(catalog, wl, *cluster, fits, po);
              if (!plan.ok()) {
                if (plan.status().code() != Status::Code::kInfeasible) return plan.status();
                row.note = plan.status().message();
              } else {
                const Candidate& best = plan->ranked.front();
                row.feasible = true;
                row.config = Label(best.config);
                row.latency_s = best.result.total.value();
                row.gpu_seconds = best.gpu_s_per_image;
                if (plan->single_gpu) row.speedup = plan->single_gpu->result.total.value() / row.latency_s;
                if (n == 1) row.speedup = 1.0;
              }
              rows.push_back(std::move(row));
            }
          }
        }
      }
    }
  }
  return rows;
}

SloAnswer MeetSlo(const std::vector<WhatIfRow>& rows, double slo) {
  SloAnswer a;
  std::map<std::string, WhatIfRow> best;
  for (const auto& r : rows) {
    if (!r.feasible || r.latency_s > slo) continue;
    auto [it, fresh] = best.emplace(SeriesName(r), r);
    if (!fresh && r.gpus < it->second.gpus) it->second = r;
    if (!a.cheapest || r.gpu_seconds < a.cheapest->gpu_seconds) a.cheapest = r;
  }
  for (auto& [k, r] : best) a.smallest.push_back(r);
  return a;
}

std::string WhatIfCsv(const std::vector<WhatIfRow>& rows) {
  std::string s = "gpu,intra,inter,gpus,nodes,height,width,frames,feasible,config,latency_s,speedup,gpu_seconds,note\n";
  for (const auto& r : rows) {
    std::string note = r.note;
    std::replace(note.begin(), note.end(), '"', '\'');
    s += fmt::format("{},{},{},{},{},{},{},{},{},\"{}\",{},{},{},\"{}\"\n", r.gpu, r.intra, r.inter, r.gpus, r.nodes,
                     r.height, r.width, r.frames, r.feasible ? "yes" : "no", r.config,
                     r.feasible ? fmt::format("{:.6g}", r.latency_s) : "", r.speedup > 0 ? fmt::format("{:.4g}", r.speedup) : "",
                     r.feasible ? fmt::format("{:.6g}", r.gpu_seconds) : "", note);
  }
  return s;
}

std::string WhatIfSvg(const std::vector<WhatIfRow>& rows, const std::string& title) {
  // Two panels side by side: latency (log y) and speedup (linear y), x = GPU count (log2).
  const double W = 1260, H = 560, top = 70, bottom = 90, left = 80, gap = 150;
  const double pw = (W - left - gap - 40) / 2, ph = H - top - bottom;
  std::map<std::string, std::vector<const WhatIfRow*>> series;
  double lat_min = 1e300, lat_max = 0, sp_max = 1;
  int n_min = 1 << 30, n_max = 1;
  for (const auto& r : rows) {
    if (!r.feasible) continue;
    series[SeriesName(r)].push_back(&r);
    lat_min = std::min(lat_min, r.latency_s);
    lat_max = std::max(lat_max, r.latency_s);
    sp_max = std::max(sp_max, r.speedup);
    n_min = std::min(n_min, r.gpus);
    n_max = std::max(n_max, r.gpus);
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica, Arial, "
      "sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"32\" font-size=\"20\" text-anchor=\"middle\">{}</text>\n",
      W, H, W / 2, EscapeHtml(title));
  if (series.empty()) return svg + "<text x=\"40\" y=\"120\" font-size=\"16\">no configuration fits</text>\n</svg>\n";
  const double lx0 = std::log2(std::max(1, n_min)), lx1 = std::max(lx0 + 1, std::log2(n_max));
  const double ly0 = std::floor(std::log10(lat_min)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(lat_max)));
  // Speedup on a log2 axis too, so that linear scaling is a straight diagonal.
  const double sp_top = std::max(2.0, std::pow(2.0, std::ceil(std::log2(std::max(sp_max, static_cast<double>(n_max))))));
  auto sp_y = [&](double v) { return top + ph - std::log2(std::max(v, 1.0)) / std::log2(sp_top) * ph; };
  auto x_of = [&](double x0, int n) { return x0 + (std::log2(n) - lx0) / (lx1 - lx0) * pw; };
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
  for (int panel = 0; panel < 2; ++panel) {
    const double x0 = left + panel * (pw + gap);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", x0, top,
                       pw, ph);
    // x ticks at the counts asked for
    std::vector<int> ticks;
    for (const auto& r : rows) {
      if (std::find(ticks.begin(), ticks.end(), r.gpus) == ticks.end()) ticks.push_back(r.gpus);
    }
    for (int n : ticks) {
      const double x = x_of(x0, n);
      svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                         "<text x=\"{0}\" y=\"{3}\" font-size=\"12\" text-anchor=\"middle\">{4}</text>\n",
                         x, top, top + ph, top + ph + 18, n);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" text-anchor=\"middle\">GPUs</text>\n", x0 + pw / 2,
                       top + ph + 40);
    if (panel == 0) {
      for (double e = ly0; e <= ly1; e += 1) {
        const double y = top + ph - (e - ly0) / (ly1 - ly0) * ph;
        svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>"
                           "<text x=\"{3}\" y=\"{4}\" font-size=\"12\" text-anchor=\"end\">{5:g}</text>\n",
                           x0, y, x0 + pw, x0 - 6, y + 4, std::pow(10.0, e));
      }
      svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" text-anchor=\"middle\" transform=\"rotate(-90 {} {})\">"
                         "latency (s, log scale)</text>\n",
                         x0 - 55, top + ph / 2, x0 - 55, top + ph / 2);
    } else {
      for (double v = 1; v <= sp_top; v *= 2) {
        const double y = sp_y(v);
        svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>"
                           "<text x=\"{3}\" y=\"{4}\" font-size=\"12\" text-anchor=\"end\">{5:g}</text>\n",
                           x0, y, x0 + pw, x0 - 6, y + 4, v);
      }
      // ideal linear speedup
      std::string ideal;
      for (int n : ticks) {
        if (n > sp_top) continue;
        ideal += fmt::format("{},{} ", x_of(x0, n), sp_y(n));
      }
      svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#999\" stroke-dasharray=\"5,4\"/>\n", ideal);
      svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" text-anchor=\"middle\" transform=\"rotate(-90 {} {})\">"
                         "speedup over one GPU (dashed: linear)</text>\n",
                         x0 - 40, top + ph / 2, x0 - 40, top + ph / 2);
    }
    int si = 0;
    for (const auto& [name, pts] : series) {
      const char* color = colors[si++ % 8];
      std::string line;
      for (const WhatIfRow* r : pts) {
        if (panel == 1 && r->speedup <= 0) continue;
        const double x = x_of(x0, r->gpus);
        const double y = panel == 0 ? top + ph - (std::log10(r->latency_s) - ly0) / (ly1 - ly0) * ph
                                    : sp_y(r->speedup);
        line += fmt::format("{},{} ", x, y);
        svg += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/>\n", x, y, color);
        if (panel == 0) {
          svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"{}\">{}</text>\n", x + 6, y - 6, color,
                             EscapeHtml(r->config));
        }
      }
      svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", line, color);
      if (panel == 0) {
        const double ly = H - 30 + 0.0;
        svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/>"
                           "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>\n",
                           left + (si - 1) * 290, ly - 4, color, left + (si - 1) * 290 + 20, ly, EscapeHtml(name));
      }
    }
  }
  return svg + "</svg>\n";
}

}  // namespace ditune
