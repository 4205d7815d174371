// The store's fit rows, shared by the files of store/ that write them (store_fits.cc defines
// them; Store::RecordRuns writes a run's fits in its own transaction). Not part of the public API.
#ifndef DITUNE_STORE_STORE_FITS_IMPL_H_
#define DITUNE_STORE_STORE_FITS_IMPL_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "costmodels/fit.h"

namespace ditune::store_internal {

// The meta row that holds a fit's factory release (Fit::factory_release).
std::string ReleaseName(int64_t fit_id);

// Deactivates each fit's (kind, key) predecessor and inserts it, with its factory release
// where it has one, inside the caller's transaction; then bumps the calibration version once.
StatusOr<std::vector<int64_t>> InsertFits(sqlite3* db, const std::string& path, const std::vector<Fit>& fits,
                                          const std::vector<std::string>& params,
                                          const std::vector<std::string>& measurement_ids);

// Validates and encodes fits before any transaction starts.
Status EncodeFits(const std::vector<Fit>& fits, std::vector<std::string>* params,
                  std::vector<std::string>* measurement_ids);

}  // namespace ditune::store_internal

#endif  // DITUNE_STORE_STORE_FITS_IMPL_H_
