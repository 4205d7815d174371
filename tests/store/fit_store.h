// Every stored measurement fitted and the fits made active: what `calibrate fit` does for op
// and collective measurements, without the calibration wing's fits of runs (RecalibrateAll).
#ifndef DITUNE_TESTS_STORE_FIT_STORE_H_
#define DITUNE_TESTS_STORE_FIT_STORE_H_

#include <string>
#include <vector>

#include "calibration/op_fits.h"
#include "costmodels/calibration.h"
#include "store/store.h"

namespace ditune::testing {

inline StatusOr<std::vector<Fit>> FitStore(Store* store, std::vector<std::string>* skipped = nullptr) {
  DITUNE_ASSIGN_OR_RETURN(std::vector<Measurement> all, store->Measurements());
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> fits, BuildFits(all, skipped));
  if (!fits.empty()) DITUNE_RETURN_IF_ERROR(store->ReplaceFits(fits));
  return fits;
}

}  // namespace ditune::testing

#endif  // DITUNE_TESTS_STORE_FIT_STORE_H_
