// The factory calibration: what ditune learned from the published record and ships as data
// (data/calibration/factory.json), so that a fresh store predicts from it.
//
// The file holds the global mechanism constants learned on the training suite (`ditune
// calibrate learn`), the suite's error before and after, and the (GPU, model) compute
// scales of the suite's published single-GPU runs under those constants, each with the
// rows it came from.
#ifndef DITUNE_CALIBRATION_FACTORY_H_
#define DITUNE_CALIBRATION_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "core/cluster.h"
#include "store/store.h"
#include "calibration/learn.h"
#include "calibration/suite.h"

namespace ditune {

// Where a fresh store's factory fits come from, relative to the data directory.
inline constexpr const char* kFactoryCalibrationPath = "calibration/factory.json";

// The factory file's document for a learning run on `rows` of the suite named `suite`.
nlohmann::json FactoryCalibrationJson(const LearnResult& learned, const std::string& suite,
                                      const std::vector<SuiteRow>& rows);

// The fits a factory document seeds: the mechanisms fit and one e2e compute-scale fit per
// (GPU, model), each e2e fit's params naming its origin ("origin": "published: <suite>
// line N, ..."). InvalidArgument naming the field when the document is malformed.
StatusOr<std::vector<Fit>> FactoryFits(const nlohmann::json& doc);

// FactoryFits of the catalog's data directory's file, each marked as of the file's release
// (Fit::factory_release: a store seeded from another release of the file is brought to this
// one when opened, StoreOptions::seed_fits); an empty list where the data directory ships
// none.
StatusOr<std::vector<Fit>> LoadFactoryFits(const Catalog& catalog);

// The release of a factory file: a 64-bit hash of its text, never 0.
uint64_t FactoryReleaseOf(std::string_view text);

// Opens the calibration store at `path` (Store::Open: an empty path is refused); a new one
// starts with LoadFactoryFits(catalog) (StoreOptions::seed_fits).
StatusOr<std::unique_ptr<Store>> OpenCalibrationStore(const Catalog& catalog, const std::string& path);

// The store a command that only reads calibration prices with: `explicit_path` (--db) when
// given, else Store::DefaultPath(). Where the default store cannot be opened and DITUNE_DB does
// not name it (no writable home in a container, a full disk), a store in memory holding only
// the shipped factory calibration, and `*note` says so (else it is left empty): pricing needs
// no write. An explicit path's failure is returned.
StatusOr<std::unique_ptr<Store>> OpenStoreForPricing(const Catalog& catalog, const std::string& explicit_path,
                                                     std::string* note);

// Where the figures behind a prediction for `model_id` on `cluster` come from, a line each:
// the (GPU, model) compute scale (learned from published runs, fitted from the store's
// measurements, or none: the catalog's peak and efficiencies), the global constants
// (learned, or the code's defaults), the per-op and collective curves (fitted, or catalog),
// and the GPU's efficiency per op class where profiler traces measured it (kernel_class).
std::vector<std::string> CalibrationSources(const std::vector<Fit>& fits, const Cluster& cluster,
                                            const std::string& model_id);

// Whether an e2e fit came from the factory calibration, and where from ("" when it did not).
std::string FactoryOrigin(const Fit& fit);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_FACTORY_H_
