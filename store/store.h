// The calibration store: measurements, the fits made from them, and executor runs, in
// one SQLite file.
//
// Durability contract: the schema is versioned (PRAGMA user_version) and migrated forward
// on open; the file is in WAL mode with a busy timeout, so several processes may read and
// write at once without losing a write; every public write is one transaction, so a killed
// process leaves either all of a write or none of it; a file that fails SQLite's integrity
// check, or is not a ditune store, is refused with a Corruption status naming the path.
// All queries are parameterised. A Store is not thread-safe: one per thread.
#ifndef DITUNE_STORE_STORE_H_
#define DITUNE_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "costmodels/fit.h"
#include "costmodels/measurement.h"

struct sqlite3;

namespace ditune {

// One executor run: the plan, what was predicted and what was measured.
struct RunRecord {
  std::string run_id;
  nlohmann::json plan = nlohmann::json::object();
  double predicted_s = 0;
  double measured_s = 0;
  std::vector<double> per_rank_s;
  int64_t unix_time = 0;
};

struct MeasurementFilter {
  std::optional<MeasurementKind> kind;
  std::optional<std::string> op;
  std::optional<std::string> device;
  std::optional<std::string> backend;
  std::optional<std::string> link;
};

struct StoreOptions {
  // Read only: nothing is created, migrated or written; the write methods return
  // InvalidArgument naming the store. For a shared calibration (a read-only mount, a copy in
  // a container image, a file on a network file system where SQLite's locking cannot be
  // trusted). A store whose file this process may not write is opened so anyway, as is any
  // store while DITUNE_DB_READ_ONLY=1.
  bool read_only = false;
  // Fits a store starts with (the factory calibration shipped in data/calibration): written
  // in one transaction when a writable store is opened holding no fits and no measurements
  // (new, or created by a process killed before it could seed it). Processes opening the same
  // new store at once (the ranks of one job) seed it once.
  //
  // Seed fits of one factory release (Fit::factory_release, the same in all of them) also
  // keep an existing store current: when a writable store holds an active fit of another
  // release, each seed fit replaces the active fit of its (kind, key) where that one is of
  // another release or there is none, and active fits of another release that no seed fit
  // replaces are deactivated; all in one transaction, once however many processes open the
  // store at once. The user's own fits (release 0: fitted from measurements, refined on runs,
  // learned with `calibrate learn --db`) are never touched, nor replaced where they are
  // active. Deciding reads only the active fits' kinds, keys and releases, never their params.
  std::vector<Fit> seed_fits;
};

class Store {
 public:
  // The newest schema version this code writes.
  static constexpr int kSchemaVersion = 2;

  // Opens (creating if absent) the store at `path`, migrating an older schema forward.
  // Refuses a newer schema, a non-ditune database and a damaged file. Read only (see
  // StoreOptions): refuses a missing file and an older schema (migrating writes), and reads
  // a WAL-mode file whose shared-memory index cannot be created beside it as immutable,
  // unless its write-ahead log holds changes (then it refuses, naming the log).
  // InvalidArgument for DITUNE_DB_READ_ONLY other than 0 or 1.
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& path, const StoreOptions& options = {});

  // $DITUNE_DB when set, else ~/.local/share/ditune/ditune.db (directories created on use).
  static std::string DefaultPath();

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts all or none (one transaction); validates each first. Returns the new ids.
  StatusOr<std::vector<int64_t>> AddMeasurements(const std::vector<Measurement>& measurements);
  // Measurements matching every set field of `filter`, ordered by id.
  StatusOr<std::vector<Measurement>> Measurements(const MeasurementFilter& filter = {}) const;
  // In the order of `ids`; NotFound naming the ids that are absent.
  StatusOr<std::vector<Measurement>> MeasurementsById(const std::vector<int64_t>& ids) const;
  // Marks measurement `id` accepted (params "accepted": true): a run the refits quarantined
  // or held counts after all. One transaction; NotFound naming the id when it is absent.
  Status AcceptMeasurement(int64_t id);

  // Deactivates the active fit with the same (kind, key) and inserts `fit` as active, in one
  // transaction. Returns the new fit's id.
  StatusOr<int64_t> ReplaceFit(const Fit& fit);
  // Replaces several fits in one transaction (a calibration pass lands whole or not at all).
  Status ReplaceFits(const std::vector<Fit>& fits);
  // Active fits, optionally of one kind, ordered by (kind, key).
  StatusOr<std::vector<Fit>> ActiveFits(const std::optional<std::string>& kind = std::nullopt) const;

  // Records `run`, replacing any earlier run with the same run_id.
  Status AddRun(const RunRecord& run);
  // Records runs, their measurements and the fits made from them in one transaction: a
  // process killed in between leaves none of them. A fit without measurement_ids is given
  // the new measurements' ids (it was fitted on them); each fit replaces the active one of
  // its (kind, key). Returns the measurements' new ids.
  StatusOr<std::vector<int64_t>> RecordRuns(const std::vector<RunRecord>& runs,
                                            const std::vector<Measurement>& measurements,
                                            std::vector<Fit> fits = {});
  // All runs, oldest first.
  StatusOr<std::vector<RunRecord>> Runs() const;

  // Increases whenever the set of active fits changes; plan caches key on it.
  StatusOr<int64_t> CalibrationVersion() const;

  // Plan cache (issue: planner caching): a JSON value per key, valid for one calibration
  // version. Get returns nullopt when absent or stale.
  Status PutCachedPlan(const std::string& key, int64_t calibration_version, const nlohmann::json& plan);
  StatusOr<std::optional<nlohmann::json>> GetCachedPlan(const std::string& key, int64_t calibration_version) const;

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }

 private:
  Store(sqlite3* db, std::string path);
  static StatusOr<std::unique_ptr<Store>> OpenReadOnly(const std::string& path, bool immutable);
  Status Migrate();
  Status SeedIfEmpty(const std::vector<Fit>& fits);
  // Brings the factory fits of an existing store to `fits`' digest (StoreOptions::seed_fits).
  Status RefreshFactoryFits(const std::vector<Fit>& fits);
  // InvalidArgument naming the store and `doing` when it is read only.
  Status CheckWritable(std::string_view doing) const;
  // Validation before a transaction, and inserts inside one.
  static StatusOr<std::vector<std::string>> CheckMeasurements(const std::vector<Measurement>& measurements);
  static StatusOr<std::pair<std::string, std::string>> CheckRun(const RunRecord& run);
  StatusOr<std::vector<int64_t>> InsertMeasurements(const std::vector<Measurement>& measurements,
                                                    const std::vector<std::string>& params, const std::string& doing);
  Status InsertRun(const RunRecord& run, const std::pair<std::string, std::string>& texts, const std::string& doing);

  sqlite3* db_;
  std::string path_;
  bool read_only_ = false;
  // Why it is read only where that is not the file's or the user's doing (a full disk).
  std::string read_only_why_;
};

}  // namespace ditune

#endif  // DITUNE_STORE_STORE_H_
