// What `ditune serve` prints: the table for people, one JSON document, a CSV of every
// request, and an SVG of latency and utilisation against offered load.
#ifndef DITUNE_SERVING_REPORT_H_
#define DITUNE_SERVING_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serving/serve.h"

namespace ditune::serving {

// {"layout", "policy", "replicas": [...], "requests": [{"id", "arrival_s", "start_s",
// "finish_s", "replica", "service_s", "batch"}], "summary": {"p50_s", "p95_s", "p99_s",
// "mean_queue_s", "utilisation", "goodput_rps", ...}}. Percentiles are null when the layout is
// unstable. `with_requests` false leaves the per-request list out.
nlohmann::json EvaluationJson(const ServeQuery& query, const Evaluation& e, bool with_requests = true);

// The summary lines of an evaluation (layout, replicas, percentiles or why unstable).
std::string EvaluationText(const ServeQuery& query, const Evaluation& e);

// id,arrival_s,start_s,finish_s,queue_s,service_s,latency_s,replica,batch,shape
std::string RequestsCsv(const Evaluation& e);

// Two panels: latency (p50 dashed, the SLO's percentile solid) and GPU utilisation against
// offered load, a line per layout; the SLO and the asked rate marked when given.
std::string LoadSvg(const std::vector<LoadCurve>& curves, std::optional<double> slo_s, double percentile,
                    std::optional<double> rate_rps, const std::string& title);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_REPORT_H_
