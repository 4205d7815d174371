#include "calibration/recalibrate.h"

#include <fmt/format.h>

#include "calibration/measured_runs.h"
#include "calibration/op_fits.h"
#include "calibration/predict.h"
#include "costmodels/calibration.h"

namespace ditune {

StatusOr<std::vector<Fit>> RecalibrateAll(Store* store, const Catalog& catalog, std::vector<std::string>* skipped) {
  DITUNE_ASSIGN_OR_RETURN(std::vector<Measurement> all, store->Measurements());
  // Collectives timed between host-memory ranks (MPI, one process) never become the curves of
  // a link between GPUs: every later GPU plan would be priced with shared-memory timings. A
  // store may hold such rows from before `calibrate comm` refused them.
  std::erase_if(all, [&](const Measurement& m) {
    if (m.kind != MeasurementKind::kCollective || (m.backend != "mpi" && m.backend != "local")) return false;
    auto link = catalog.Link(m.link);
    if (!link.ok() || (*link)->scope != LinkScope::kIntra || (*link)->topology == LinkTopology::kSharedMemory) {
      return false;
    }
    if (skipped != nullptr) {
      skipped->push_back(fmt::format("measurement {} ({} {} over {}): host-memory ranks measure shared memory, not "
                                     "{}; left out of its curves",
                                     m.id, m.op, m.backend, m.link, m.link));
    }
    return true;
  });
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> fits, BuildFits(all, skipped));
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> active, store->ActiveFits(std::string(kFitKindMechanisms)));
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> terms, FitPipelineTerms(all, catalog, skipped));
  // The engine's runs are priced with the global constants the predictions will use.
  std::vector<Fit> priced = fits;
  priced.insert(priced.end(), active.begin(), active.end());
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> engine, FitEngineScales(all, catalog, priced, skipped));
  fits.insert(fits.end(), terms.begin(), terms.end());
  fits.insert(fits.end(), engine.begin(), engine.end());
  // The user's xDiT runs, priced over everything in force (the factory fits among them).
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> in_force, store->ActiveFits());
  for (const auto& f : fits) {
    std::erase_if(in_force, [&](const Fit& g) { return g.kind == f.kind && g.key == f.key; });
    in_force.push_back(f);
  }
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> runs, FitMeasuredRuns(all, catalog, in_force, skipped));
  fits.insert(fits.end(), runs.begin(), runs.end());
  if (!fits.empty()) DITUNE_RETURN_IF_ERROR(store->ReplaceFits(fits));
  return fits;
}

}  // namespace ditune
