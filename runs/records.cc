#include "runs/records.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace ditune::calibration {
namespace {

nlohmann::json PlanJson(const ModelSpec& model, const Workload& w, const ParallelConfig& config, int ranks) {
  return {{"model", model.id}, {"height", w.height}, {"width", w.width}, {"frames", w.frames},
          {"steps", w.steps},  {"batch", w.batch},   {"config", ToString(config)}, {"ranks", ranks}};
}

}  // namespace

std::string NewRunId(const std::string& tag) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() % 1000000000LL;
  return fmt::format("run-{}-{}-{}-{:09d}", static_cast<long long>(std::time(nullptr)), tag,
                     static_cast<long long>(getpid()), ns);
}

Measurement DitMeasurement(const ModelSpec& model, const Workload& w, const ParallelConfig& config, int ranks,
                           const std::string& backend, const std::string& device, double median_s, double p10_s,
                           double p90_s, int iters, const std::string& run_id, nlohmann::json extra) {
  Measurement meas;
  meas.source = MeasurementSource::kExecutor;
  meas.kind = MeasurementKind::kE2e;
  meas.op = "dit";
  meas.backend = backend;
  meas.device = device;
  meas.ranks = ranks;
  meas.link = ranks > 1 ? "shm" : "";
  meas.params = PlanJson(model, w, config, ranks);
  meas.params.update(extra);
  meas.median = Seconds(median_s);
  meas.p10 = Seconds(std::min(p10_s, median_s));
  meas.p90 = Seconds(std::max(p90_s, median_s));
  meas.samples = iters;
  meas.run_id = run_id;
  return meas;
}

RunRecord EngineRunRecord(const ModelSpec& model, const Workload& w, const ParallelConfig& config,
                          const std::string& backend, const std::string& device, const std::string& comm,
                          double predicted_s, const exec::EngineRunResult& r, const std::string& run_id) {
  RunRecord rec;
  rec.run_id = run_id;
  rec.plan = PlanJson(model, w, config, config.world_size());
  rec.plan["backend"] = backend;
  rec.plan["device"] = device;
  if (!comm.empty()) rec.plan["comm"] = comm;
  rec.predicted_s = predicted_s;
  rec.measured_s = r.median_s;
  rec.per_rank_s = r.rank_median_s.empty() ? std::vector<double>{r.median_s} : r.rank_median_s;
  return rec;
}

}  // namespace ditune::calibration
