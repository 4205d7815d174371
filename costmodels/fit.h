// A fitted cost-model parameter set: what calibration makes of measurements, what the store
// keeps, and what the cost models are built from (costmodels/calibration.h).
#ifndef DITUNE_COSTMODELS_FIT_H_
#define DITUNE_COSTMODELS_FIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditune {

// A fitted cost-model parameter set. `kind` names the model family ("comm", "compute",
// "e2e"); `key` what it applies to (e.g. "all_to_all/nvlink4/intra"); only one fit per
// (kind, key) is active at a time.
struct Fit {
  int64_t id = 0;
  std::string kind;
  std::string key;
  nlohmann::json params = nlohmann::json::object();  // the model's parameters
  int points = 0;                                    // measurements used
  double mape = 0;                                   // mean absolute percentage error on them, as a fraction
  std::vector<int64_t> measurement_ids;              // which measurements
  bool active = true;
  int64_t unix_time = 0;
  // The release of the shipped factory calibration the fit was seeded from (a digest of its
  // file); 0 for the user's own fits. Kept beside the fit, not in its params, so that any
  // ditune reads the params.
  uint64_t factory_release = 0;
};

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_FIT_H_
