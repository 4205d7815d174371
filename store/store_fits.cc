// The store's fits: reading and validating fit rows, replacing fits (each deactivates its
// predecessor of the same kind and key, in one transaction that bumps the calibration
// version), seeding and refreshing the factory calibration, and the active fits.
#include "store/store.h"

#include "store/store_fits_impl.h"
#include "store/store_schema_impl.h"
#include "store/store_sqlite_impl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sqlite3.h>

#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace ditune {
namespace {

using namespace store_internal;  // NOLINT: the store is the one user of its SQLite layer

constexpr std::string_view kFitColumns =
    "id, kind, key, params, points, mape, measurement_ids, active, unix_time";

StatusOr<Fit> ReadFit(const Statement& s, const std::string& path) {
  Fit f;
  f.id = s.Int(0);
  f.kind = s.Text(1);
  f.key = s.Text(2);
  f.params = nlohmann::json::parse(s.Text(3), nullptr, /*allow_exceptions=*/false);
  if (f.params.is_discarded()) return BadColumn(path, "fits", f.id, "params", "is not valid JSON");
  f.points = static_cast<int>(s.Int(4));
  f.mape = s.Double(5);
  nlohmann::json ids = nlohmann::json::parse(s.Text(6), nullptr, /*allow_exceptions=*/false);
  if (!ids.is_array()) {
    return BadColumn(path, "fits", f.id, "measurement_ids", "is not a JSON array");
  }
  for (const auto& id : ids) {
    if (!id.is_number_integer()) {
      return BadColumn(path, "fits", f.id, "measurement_ids", "holds a value that is not an id");
    }
    f.measurement_ids.push_back(id.get<int64_t>());
  }
  f.active = s.Int(7) != 0;
  f.unix_time = s.Int(8);
  return f;
}

Status ValidateFit(const Fit& fit) {
  auto bad = [&](std::string_view what) {
    return Status::InvalidArgument(fmt::format("fit '{}/{}': {}", fit.kind, fit.key, what));
  };
  if (fit.kind.empty()) return bad("kind is empty");
  if (fit.key.empty()) return bad("key is empty");
  if (fit.points < 0) return bad("points must be >= 0");
  if (!std::isfinite(fit.mape) || fit.mape < 0) return bad("mape must be finite and >= 0");
  return Status::Ok();
}

}  // namespace

namespace store_internal {

// The meta row that holds a fit's factory release (Fit::factory_release).
std::string ReleaseName(int64_t fit_id) { return fmt::format("factory_release/{}", fit_id); }

// Deactivates each fit's (kind, key) predecessor and inserts it, with its factory release
// where it has one, inside the caller's transaction; then bumps the calibration version once.
StatusOr<std::vector<int64_t>> InsertFits(sqlite3* db, const std::string& path,
                                          const std::vector<Fit>& fits,
                                          const std::vector<std::string>& params,
                                          const std::vector<std::string>& measurement_ids) {
  const std::string doing = fmt::format("replacing {} fits", fits.size());
  DITUNE_ASSIGN_OR_RETURN(
      Statement deactivate,
      Statement::Prepare(
          db, path, "UPDATE fits SET active = 0 WHERE kind = ? AND key = ? AND active = 1", doing));
  DITUNE_ASSIGN_OR_RETURN(
      Statement insert,
      Statement::Prepare(
          db, path,
          fmt::format("INSERT INTO fits ({}) VALUES (NULL, ?, ?, ?, ?, ?, ?, 1, ?)", kFitColumns),
          doing));
  DITUNE_ASSIGN_OR_RETURN(
      Statement bump,
      Statement::Prepare(
          db, path, "UPDATE meta SET value = value + 1 WHERE name = 'calibration_version'", doing));
  DITUNE_ASSIGN_OR_RETURN(
      Statement mark,
      Statement::Prepare(db, path, "INSERT OR REPLACE INTO meta(name, value) VALUES (?, ?)", doing));
  const int64_t now = UnixNow();
  std::vector<int64_t> ids;
  ids.reserve(fits.size());
  for (size_t i = 0; i < fits.size(); ++i) {
    const Fit& f = fits[i];
    deactivate.Reset();
    deactivate.BindText(1, f.kind);
    deactivate.BindText(2, f.key);
    DITUNE_RETURN_IF_ERROR(deactivate.Run());
    insert.Reset();
    insert.BindText(1, f.kind);
    insert.BindText(2, f.key);
    insert.BindText(3, params[i]);
    insert.BindInt(4, f.points);
    insert.BindDouble(5, f.mape);
    insert.BindText(6, measurement_ids[i]);
    insert.BindInt(7, f.unix_time != 0 ? f.unix_time : now);
    DITUNE_RETURN_IF_ERROR(insert.Run());
    ids.push_back(sqlite3_last_insert_rowid(db));
    if (f.factory_release != 0) {
      mark.Reset();
      mark.BindText(1, ReleaseName(ids.back()));
      mark.BindInt(2, static_cast<int64_t>(f.factory_release));
      DITUNE_RETURN_IF_ERROR(mark.Run());
    }
  }
  DITUNE_RETURN_IF_ERROR(bump.Run());
  if (sqlite3_changes(db) != 1) {
    return Damaged(path, "table meta has no calibration_version row");
  }
  return ids;
}

// Validates and encodes fits before any transaction starts.
Status EncodeFits(const std::vector<Fit>& fits, std::vector<std::string>* params,
                  std::vector<std::string>* measurement_ids) {
  for (const Fit& f : fits) {
    DITUNE_RETURN_IF_ERROR(ValidateFit(f));
    const std::string which = fmt::format("fit '{}/{}'", f.kind, f.key);
    DITUNE_ASSIGN_OR_RETURN(std::string p, DumpJson(f.params, which + " params"));
    params->push_back(std::move(p));
    measurement_ids->push_back(nlohmann::json(f.measurement_ids).dump());
  }
  return Status::Ok();
}

}  // namespace store_internal

StatusOr<int64_t> Store::ReplaceFit(const Fit& fit) {
  std::vector<Fit> fits = {fit};
  std::vector<std::string> params, measurement_ids;
  DITUNE_RETURN_IF_ERROR(EncodeFits(fits, &params, &measurement_ids));
  DITUNE_RETURN_IF_ERROR(CheckWritable("calibrating (a new fit)"));
  DITUNE_ASSIGN_OR_RETURN(
      WriteTransaction txn,
      WriteTransaction::Begin(db_, path_, fmt::format("replacing fit '{}/{}'", fit.kind, fit.key)));
  DITUNE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                          InsertFits(db_, path_, fits, params, measurement_ids));
  DITUNE_RETURN_IF_ERROR(txn.Commit());
  return ids.front();
}

Status Store::ReplaceFits(const std::vector<Fit>& fits) {
  std::vector<std::string> params, measurement_ids;
  DITUNE_RETURN_IF_ERROR(EncodeFits(fits, &params, &measurement_ids));
  if (fits.empty()) return Status::Ok();  // the active set is unchanged
  DITUNE_RETURN_IF_ERROR(CheckWritable("calibrating (new fits)"));
  DITUNE_ASSIGN_OR_RETURN(
      WriteTransaction txn,
      WriteTransaction::Begin(db_, path_, fmt::format("replacing {} fits", fits.size())));
  StatusOr<std::vector<int64_t>> ids = InsertFits(db_, path_, fits, params, measurement_ids);
  if (!ids.ok()) return ids.status();
  return txn.Commit();
}

namespace {

// Whether the store holds neither fits nor measurements. The statement is finished before this
// returns: a statement left pending would keep its read snapshot, and a write started on a
// stale snapshot fails at once when another process has written since.
StatusOr<bool> StoreIsEmpty(sqlite3* db, const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement count,
      Statement::Prepare(db, path,
                         "SELECT (SELECT COUNT(*) FROM fits) + (SELECT COUNT(*) FROM measurements)",
                         "checking whether the store is new"));
  DITUNE_ASSIGN_OR_RETURN(bool row, count.Step());
  return row && count.Int(0) == 0;
}

}  // namespace

Status Store::SeedIfEmpty(const std::vector<Fit>& fits) {
  // The cheap check needs no lock; the store is new only once, and then the check is made
  // again under the write lock, so that processes opening a new store at once (the ranks of
  // one job) seed it once.
  DITUNE_ASSIGN_OR_RETURN(bool empty, StoreIsEmpty(db_, path_));
  if (!empty) return Status::Ok();
  std::vector<std::string> params, measurement_ids;
  DITUNE_RETURN_IF_ERROR(EncodeFits(fits, &params, &measurement_ids));
  DITUNE_RETURN_IF_ERROR(CheckWritable("seeding the factory fits"));
  DITUNE_ASSIGN_OR_RETURN(
      WriteTransaction txn,
      WriteTransaction::Begin(db_, path_, fmt::format("seeding {} factory fits", fits.size())));
  DITUNE_ASSIGN_OR_RETURN(empty, StoreIsEmpty(db_, path_));
  if (!empty) return Status::Ok();  // another process seeded it first; the guard rolls back
  DITUNE_RETURN_IF_ERROR(InsertFits(db_, path_, fits, params, measurement_ids).status());
  return txn.Commit();
}

namespace {

using KindKey = std::pair<std::string, std::string>;

// The factory release of each active fit, by (kind, key); 0 for the user's own. Reads no
// params, so that one damaged fit does not stop a store from opening.
StatusOr<std::map<KindKey, uint64_t>> ActiveReleases(sqlite3* db, const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db, path,
                         "SELECT f.kind, f.key, COALESCE(m.value, 0) FROM fits AS f LEFT JOIN meta AS m "
                         "ON m.name = 'factory_release/' || f.id WHERE f.active = 1",
                         "reading the active fits' factory releases"));
  std::map<KindKey, uint64_t> out;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out[{s.Text(0), s.Text(1)}] = static_cast<uint64_t>(s.Int(2));
  }
  return out;
}

// What bringing a store whose active fits are of `current` releases to the factory fits
// `fits` of `release` writes: the seed fits to insert (each replacing the active fit of its
// kind and key) and the other release's fits to deactivate. Both empty when no active fit is
// of another release.
void StaleFactoryFits(const std::map<KindKey, uint64_t>& current, const std::vector<Fit>& fits, uint64_t release,
                      std::vector<Fit>* insert, std::vector<KindKey>* retire) {
  auto other = [release](uint64_t r) { return r != 0 && r != release; };
  if (std::none_of(current.begin(), current.end(), [&](const auto& kv) { return other(kv.second); })) return;
  std::set<KindKey> shipped;
  for (const auto& f : fits) {
    shipped.insert({f.kind, f.key});
    auto it = current.find({f.kind, f.key});
    if (it == current.end() || other(it->second)) insert->push_back(f);
  }
  for (const auto& [kind_key, r] : current) {
    if (other(r) && !shipped.contains(kind_key)) retire->push_back(kind_key);
  }
}

}  // namespace

Status Store::RefreshFactoryFits(const std::vector<Fit>& fits) {
  if (read_only_ || fits.empty()) return Status::Ok();
  const uint64_t release = fits.front().factory_release;
  if (release == 0) return Status::Ok();
  for (const auto& f : fits) {
    if (f.factory_release != release) {
      return Status::InvalidArgument("factory fits: every seed fit must be of the same factory release");
    }
  }
  // The cheap check needs no lock; the refresh is decided again under the write lock, so that
  // processes opening the store at once refresh it once.
  std::vector<Fit> insert;
  std::vector<KindKey> retire;
  {
    DITUNE_ASSIGN_OR_RETURN(auto current, ActiveReleases(db_, path_));
    StaleFactoryFits(current, fits, release, &insert, &retire);
  }
  if (insert.empty() && retire.empty()) return Status::Ok();
  DITUNE_ASSIGN_OR_RETURN(WriteTransaction txn,
                          WriteTransaction::Begin(db_, path_, "bringing the factory fits to this release"));
  insert.clear();
  retire.clear();
  {
    DITUNE_ASSIGN_OR_RETURN(auto current, ActiveReleases(db_, path_));
    StaleFactoryFits(current, fits, release, &insert, &retire);
  }
  if (insert.empty() && retire.empty()) return Status::Ok();  // another process did it; the guard rolls back
  const std::string doing = "retiring the factory fits of another release";
  DITUNE_ASSIGN_OR_RETURN(
      Statement deactivate,
      Statement::Prepare(db_, path_, "UPDATE fits SET active = 0 WHERE kind = ? AND key = ? AND active = 1", doing));
  for (const auto& [kind, key] : retire) {
    deactivate.Reset();
    deactivate.BindText(1, kind);
    deactivate.BindText(2, key);
    DITUNE_RETURN_IF_ERROR(deactivate.Run());
  }
  std::vector<std::string> params, measurement_ids;
  DITUNE_RETURN_IF_ERROR(EncodeFits(insert, &params, &measurement_ids));
  // InsertFits bumps the calibration version, also where it inserts nothing and retirements
  // alone changed the active fits.
  DITUNE_RETURN_IF_ERROR(InsertFits(db_, path_, insert, params, measurement_ids).status());
  return txn.Commit();
}

StatusOr<std::vector<Fit>> Store::ActiveFits(const std::optional<std::string>& kind) const {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_,
                         fmt::format("SELECT {}, COALESCE((SELECT value FROM meta WHERE name = "
                                     "'factory_release/' || fits.id), 0) FROM fits WHERE active = 1{} "
                                     "ORDER BY kind, key",
                                     kFitColumns, kind ? " AND kind = ?" : ""),
                         "reading active fits"));
  if (kind) s.BindText(1, *kind);
  std::vector<Fit> out;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    DITUNE_ASSIGN_OR_RETURN(Fit f, ReadFit(s, path_));
    f.factory_release = static_cast<uint64_t>(s.Int(9));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ditune
