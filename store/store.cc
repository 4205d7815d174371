#include "store/store.h"

#include "store/store_fits_impl.h"
#include "store/store_schema_impl.h"
#include "store/store_sqlite_impl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include <unistd.h>

namespace ditune {
namespace {

using namespace store_internal;  // NOLINT: the store is the one user of its SQLite layer

// ---- Rows ------------------------------------------------------------------------------

constexpr std::string_view kMeasurementColumns =
    "id, source, kind, op, backend, device, params, ranks, link, bytes, flops, median_s, p10_s, "
    "p90_s, samples, run_id, unix_time";

StatusOr<Measurement> ReadMeasurement(const Statement& s, const std::string& path) {
  Measurement m;
  m.id = s.Int(0);
  StatusOr<MeasurementSource> source = ParseMeasurementSource(s.Text(1));
  if (!source.ok())
    return BadColumn(path, "measurements", m.id, "source", source.status().message());
  m.source = *source;
  StatusOr<MeasurementKind> kind = ParseMeasurementKind(s.Text(2));
  if (!kind.ok()) return BadColumn(path, "measurements", m.id, "kind", kind.status().message());
  m.kind = *kind;
  m.op = s.Text(3);
  m.backend = s.Text(4);
  m.device = s.Text(5);
  m.params = nlohmann::json::parse(s.Text(6), nullptr, /*allow_exceptions=*/false);
  if (!m.params.is_object()) {
    return BadColumn(path, "measurements", m.id, "params", "is not a JSON object");
  }
  m.ranks = static_cast<int>(s.Int(7));
  m.link = s.Text(8);
  m.bytes = Bytes(s.Double(9));
  m.flops = Flops(s.Double(10));
  m.median = Seconds(s.Double(11));
  m.p10 = Seconds(s.Double(12));
  m.p90 = Seconds(s.Double(13));
  m.samples = static_cast<int>(s.Int(14));
  m.run_id = s.Text(15);
  m.unix_time = s.Int(16);
  return m;
}

}  // namespace

// ---- Store -----------------------------------------------------------------------------

Store::Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

Store::~Store() { sqlite3_close_v2(db_); }

std::string Store::DefaultPath() {
  const char* env = std::getenv("DITUNE_DB");
  if (env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  std::filesystem::path base = (home != nullptr && *home != '\0') ? home : ".";
  return (base / ".local" / "share" / "ditune" / "ditune.db").string();
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  if (path.empty()) {
    return Status::InvalidArgument(
        "the calibration store path is empty (--db \"\" or DITUNE_DB=\"\"): give the database's file path, or "
        "leave both out for the default");
  }
  if (path.rfind("file:", 0) == 0) {
    return Status::InvalidArgument(fmt::format(
        "the calibration store '{}' is an SQLite URI; give the database's file path (--db or DITUNE_DB), and "
        "DITUNE_DB_READ_ONLY=1 to open it read only",
        path));
  }
  bool read_only = options.read_only;
  if (const char* env = std::getenv("DITUNE_DB_READ_ONLY"); env != nullptr && *env != '\0') {
    const std::string_view v(env);
    if (v != "0" && v != "1") {
      return Status::InvalidArgument(fmt::format("DITUNE_DB_READ_ONLY='{}': valid: 0, 1 (read only)", v));
    }
    // A scratch store in memory is this process's own: never read only.
    read_only = read_only || (v == "1" && path != ":memory:");
  }
  if (path != ":memory:") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return Status::InvalidArgument(fmt::format(
          "the calibration store {} is a directory; give a file path (--db or DITUNE_DB)", path));
    }
    const bool exists = std::filesystem::exists(path, ec);
    if (exists && !std::filesystem::is_regular_file(path, ec)) {
      return Status::InvalidArgument(fmt::format(
          "the calibration store {} is not a regular file (a device, FIFO or socket); give a file path (--db or "
          "DITUNE_DB)",
          path));
    }
    // A store this process may read but not write (a read-only mount, another user's file)
    // still serves every command that only reads it.
    if (exists && ::access(path.c_str(), W_OK) != 0) read_only = true;
    if (read_only) {
      if (!exists) {
        return Status::InvalidArgument(fmt::format(
            "the calibration store {} does not exist, and a read-only store is never created (give an existing "
            "store with --db or DITUNE_DB, or unset DITUNE_DB_READ_ONLY)",
            path));
      }
      return OpenReadOnly(path, /*immutable=*/false);
    }
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::filesystem::create_directories(parent, ec);
      if (ec) {
        return Status::InvalidArgument(
            fmt::format("cannot create directory {} for the calibration store "
                        "{}: {} (give another path with --db or DITUNE_DB)",
                        parent.string(), path, ec.message()));
      }
    }
  }

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  // The Store owns the handle from here on, even when opening failed.
  std::unique_ptr<Store> store(new Store(db, path));
  if ((rc & 0xff) == SQLITE_CANTOPEN) {
    const int err = db != nullptr ? sqlite3_system_errno(db) : 0;
    return Status::InvalidArgument(fmt::format("cannot open the calibration store {}: {} (give a writable file path "
                                               "with --db or DITUNE_DB)",
                                               path, err != 0 ? std::strerror(err) : sqlite3_errstr(rc)));
  }
  if (rc != SQLITE_OK) return SqliteError(db, rc, "opening the calibration store", path);
  if (sqlite3_db_readonly(db, "main") == 1) {
    store.reset();
    return OpenReadOnly(path, /*immutable=*/false);
  }
  sqlite3_extended_result_codes(db, 1);
  rc = sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "setting the busy timeout", path);
  DITUNE_RETURN_IF_ERROR(Exec(db, path, "PRAGMA foreign_keys=ON", "enabling foreign keys"));
  // Check before anything writes to the file.
  if (Status checked = QuickCheck(db, path); !checked.ok()) {
    const int code = sqlite3_extended_errcode(db) & 0xff;
    if (code != SQLITE_IOERR && code != SQLITE_FULL) return checked;
    // The file system refuses to grow (a full disk: the WAL's files cannot be made): what only
    // reads the store still works, and a write names the cause.
    store.reset();
    auto ro = OpenReadOnly(path, /*immutable=*/false);
    if (!ro.ok()) ro = OpenReadOnly(path, /*immutable=*/true);
    if (!ro.ok()) return checked;
    (*ro)->read_only_why_ = fmt::format("the file system under it refused to write ({})", checked.message());
    return ro;
  }
  DITUNE_ASSIGN_OR_RETURN(SchemaState state, ReadSchemaState(db, path));
  DITUNE_RETURN_IF_ERROR(CheckSchema(state, path));
  DITUNE_RETURN_IF_ERROR(EnableWal(db, path));
  // In WAL mode NORMAL still keeps every commit atomic across a crash of the process.
  DITUNE_RETURN_IF_ERROR(Exec(db, path, "PRAGMA synchronous=NORMAL", "setting synchronous mode"));
  DITUNE_RETURN_IF_ERROR(store->Migrate());
  DITUNE_RETURN_IF_ERROR(CheckColumns(db, path));
  if (!options.seed_fits.empty()) {
    DITUNE_RETURN_IF_ERROR(store->SeedIfEmpty(options.seed_fits));
    DITUNE_RETURN_IF_ERROR(store->RefreshFactoryFits(options.seed_fits));
  }
  return store;
}

StatusOr<std::unique_ptr<Store>> Store::OpenReadOnly(const std::string& path, bool immutable) {
  sqlite3* db = nullptr;
  // immutable: no locks and no shared-memory index (a WAL file's -shm that cannot be created
  // on a read-only mount); the file must not change while open, which a read-only mount
  // guarantees.
  std::string name = path;
  int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
  if (immutable) {
    name = "file:";
    for (char c : std::filesystem::absolute(path).string()) {
      if (c == '%' || c == '?' || c == '#') {
        name += fmt::format("%{:02X}", static_cast<unsigned char>(c));
      } else {
        name += c;
      }
    }
    name += "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
  std::unique_ptr<Store> store(new Store(db, path));
  store->read_only_ = true;
  if (rc != SQLITE_OK) {
    const int err = db != nullptr ? sqlite3_system_errno(db) : 0;
    return Status::InvalidArgument(fmt::format("cannot open the calibration store {} for reading: {}", path,
                                               err != 0 ? std::strerror(err) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(db, 1);
  rc = sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "setting the busy timeout", path);
  // The first read opens the WAL index when the file is in WAL mode.
  rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  if (!immutable && ((rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY)) {
    std::error_code ec;
    const auto wal = std::filesystem::file_size(path + "-wal", ec);
    if (!ec && wal > 0) {
      return Status::InvalidArgument(fmt::format(
          "the calibration store {} is read-only here and its write-ahead log {}-wal holds changes not yet merged "
          "into it (a process was killed while writing): open it once where it is writable, or give a writable "
          "copy of both files with --db",
          path, path));
    }
    store.reset();
    return OpenReadOnly(path, /*immutable=*/true);
  }
  if (rc != SQLITE_OK) return SqliteError(db, rc, "reading the calibration store", path);
  DITUNE_RETURN_IF_ERROR(QuickCheck(db, path));
  DITUNE_ASSIGN_OR_RETURN(SchemaState state, ReadSchemaState(db, path));
  DITUNE_RETURN_IF_ERROR(CheckSchema(state, path));
  if (state.version != kSchemaVersion) {
    return Status::InvalidArgument(fmt::format(
        "the calibration store {} has schema version {} and this ditune reads version {}: it must be migrated, "
        "which writes: open it once where it is writable (or give a writable copy with --db)",
        path, state.version, kSchemaVersion));
  }
  DITUNE_RETURN_IF_ERROR(CheckColumns(db, path));
  return store;
}

Status Store::CheckWritable(std::string_view doing) const {
  if (!read_only_) return Status::Ok();
  if (!read_only_why_.empty()) {
    return Status::IOError(fmt::format("the calibration store {} is open read-only: {}; {} writes into it: free "
                                       "space there, or give another store with --db or DITUNE_DB",
                                       path_, read_only_why_, doing));
  }
  return Status::InvalidArgument(fmt::format(
      "the calibration store {} is open read-only (not writable here, or DITUNE_DB_READ_ONLY=1); {} writes into "
      "it: give a writable store with --db or DITUNE_DB",
      path_, doing));
}


StatusOr<std::vector<std::string>> Store::CheckMeasurements(const std::vector<Measurement>& measurements) {
  // Everything that can fail on the input fails before a transaction starts.
  std::vector<std::string> params;
  params.reserve(measurements.size());
  for (size_t i = 0; i < measurements.size(); ++i) {
    const std::string which =
        fmt::format("measurement #{} of {} (counting from 0)", i, measurements.size());
    DITUNE_RETURN_IF_ERROR(measurements[i].Validate().WithContext(which));
    StatusOr<std::string> dumped = DumpJson(measurements[i].params, which + " params");
    if (!dumped.ok()) return dumped.status();
    params.push_back(std::move(dumped).value());
  }
  return params;
}

StatusOr<std::vector<int64_t>> Store::InsertMeasurements(const std::vector<Measurement>& measurements,
                                                         const std::vector<std::string>& params,
                                                         const std::string& doing) {
  std::vector<int64_t> ids;
  DITUNE_ASSIGN_OR_RETURN(
      Statement insert,
      Statement::Prepare(
          db_, path_,
          fmt::format("INSERT INTO measurements ({}) VALUES (NULL, ?, ?, ?, ?, ?, ?, "
                      "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      kMeasurementColumns),
          doing));
  const int64_t now = UnixNow();
  ids.reserve(measurements.size());
  for (size_t i = 0; i < measurements.size(); ++i) {
    const Measurement& m = measurements[i];
    insert.Reset();
    insert.BindText(1, ToString(m.source));
    insert.BindText(2, ToString(m.kind));
    insert.BindText(3, m.op);
    insert.BindText(4, m.backend);
    insert.BindText(5, m.device);
    insert.BindText(6, params[i]);
    insert.BindInt(7, m.ranks);
    insert.BindText(8, m.link);
    insert.BindDouble(9, m.bytes.value());
    insert.BindDouble(10, m.flops.value());
    insert.BindDouble(11, m.median.value());
    insert.BindDouble(12, m.p10.value());
    insert.BindDouble(13, m.p90.value());
    insert.BindInt(14, m.samples);
    insert.BindText(15, m.run_id);
    insert.BindInt(16, m.unix_time != 0 ? m.unix_time : now);
    DITUNE_RETURN_IF_ERROR(insert.Run());
    ids.push_back(sqlite3_last_insert_rowid(db_));
  }
  return ids;
}

StatusOr<std::vector<int64_t>> Store::AddMeasurements(
    const std::vector<Measurement>& measurements) {
  DITUNE_ASSIGN_OR_RETURN(std::vector<std::string> params, CheckMeasurements(measurements));
  if (measurements.empty()) return std::vector<int64_t>{};
  const std::string doing = fmt::format("adding {} measurements", measurements.size());
  DITUNE_RETURN_IF_ERROR(CheckWritable(doing));
  DITUNE_ASSIGN_OR_RETURN(WriteTransaction txn, WriteTransaction::Begin(db_, path_, doing));
  DITUNE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, InsertMeasurements(measurements, params, doing));
  DITUNE_RETURN_IF_ERROR(txn.Commit());
  return ids;
}

StatusOr<std::vector<Measurement>> Store::Measurements(const MeasurementFilter& filter) const {
  std::vector<std::string> values;
  std::string where;
  auto add = [&](std::string_view column, std::string_view value) {
    where += where.empty() ? " WHERE " : " AND ";
    where += fmt::format("{} = ?", column);
    values.emplace_back(value);
  };
  if (filter.kind) add("kind", ToString(*filter.kind));
  if (filter.op) add("op", *filter.op);
  if (filter.device) add("device", *filter.device);
  if (filter.backend) add("backend", *filter.backend);
  if (filter.link) add("link", *filter.link);

  DITUNE_ASSIGN_OR_RETURN(
      Statement s, Statement::Prepare(db_, path_,
                                      fmt::format("SELECT {} FROM measurements{} ORDER BY id",
                                                  kMeasurementColumns, where),
                                      "reading measurements"));
  for (size_t i = 0; i < values.size(); ++i) s.BindText(static_cast<int>(i + 1), values[i]);
  std::vector<Measurement> out;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    DITUNE_ASSIGN_OR_RETURN(Measurement m, ReadMeasurement(s, path_));
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<std::vector<Measurement>> Store::MeasurementsById(const std::vector<int64_t>& ids) const {
  std::vector<Measurement> out;
  if (ids.empty()) return out;
  // One read transaction: all rows from the same snapshot.
  DITUNE_RETURN_IF_ERROR(Exec(db_, path_, "BEGIN", "reading measurements by id"));
  struct EndRead {
    sqlite3* db;
    ~EndRead() {
      if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    }
  } end_read{db_};
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(
          db_, path_, fmt::format("SELECT {} FROM measurements WHERE id = ?", kMeasurementColumns),
          "reading measurements by id"));
  out.reserve(ids.size());
  std::vector<int64_t> missing;
  for (int64_t id : ids) {
    s.Reset();
    s.BindInt(1, id);
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) {
      missing.push_back(id);
      continue;
    }
    DITUNE_ASSIGN_OR_RETURN(Measurement m, ReadMeasurement(s, path_));
    out.push_back(std::move(m));
  }
  if (!missing.empty()) {
    return Status::NotFound(
        fmt::format("{}: no measurement with id {}", path_, fmt::join(missing, ", ")));
  }
  return out;
}

StatusOr<std::pair<std::string, std::string>> Store::CheckRun(const RunRecord& run) {
  if (run.run_id.empty()) return Status::InvalidArgument("run: run_id is empty");
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(run.predicted_s) || !finite(run.measured_s)) {
    return Status::InvalidArgument(
        fmt::format("run {}: predicted_s and measured_s must be finite", run.run_id));
  }
  for (double t : run.per_rank_s) {
    if (!finite(t)) {
      return Status::InvalidArgument(
          fmt::format("run {}: per_rank_s holds a value that is not finite", run.run_id));
    }
  }
  const std::string which = fmt::format("run {}", run.run_id);
  DITUNE_ASSIGN_OR_RETURN(std::string plan, DumpJson(run.plan, which + " plan"));
  return std::make_pair(std::move(plan), nlohmann::json(run.per_rank_s).dump());
}

Status Store::InsertRun(const RunRecord& run, const std::pair<std::string, std::string>& texts,
                        const std::string& doing) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_,
                         "INSERT OR REPLACE INTO runs (run_id, plan, predicted_s, measured_s, "
                         "per_rank_s, unix_time) VALUES (?, ?, ?, ?, ?, ?)",
                         doing));
  s.BindText(1, run.run_id);
  s.BindText(2, texts.first);
  s.BindDouble(3, run.predicted_s);
  s.BindDouble(4, run.measured_s);
  s.BindText(5, texts.second);
  s.BindInt(6, run.unix_time != 0 ? run.unix_time : UnixNow());
  return s.Run();
}

Status Store::AcceptMeasurement(int64_t id) {
  const std::string doing = fmt::format("accepting measurement {}", id);
  DITUNE_RETURN_IF_ERROR(CheckWritable(doing));
  DITUNE_ASSIGN_OR_RETURN(WriteTransaction txn, WriteTransaction::Begin(db_, path_, doing));
  DITUNE_ASSIGN_OR_RETURN(Statement read,
                          Statement::Prepare(db_, path_, "SELECT params FROM measurements WHERE id = ?", doing));
  read.BindInt(1, id);
  DITUNE_ASSIGN_OR_RETURN(bool found, read.Step());
  if (!found) return Status::NotFound(fmt::format("{}: no measurement {}", path_, id));
  nlohmann::json params = nlohmann::json::parse(read.Text(0), nullptr, /*allow_exceptions=*/false);
  if (!params.is_object()) return BadColumn(path_, "measurements", id, "params", "is not a JSON object");
  params["accepted"] = true;
  DITUNE_ASSIGN_OR_RETURN(std::string text, DumpJson(params, fmt::format("measurement {} params", id)));
  DITUNE_ASSIGN_OR_RETURN(Statement write,
                          Statement::Prepare(db_, path_, "UPDATE measurements SET params = ? WHERE id = ?", doing));
  write.BindText(1, text);
  write.BindInt(2, id);
  DITUNE_RETURN_IF_ERROR(write.Run());
  return txn.Commit();
}

Status Store::AddRun(const RunRecord& run) { return RecordRuns({run}, {}).status(); }

StatusOr<std::vector<int64_t>> Store::RecordRuns(const std::vector<RunRecord>& runs,
                                                 const std::vector<Measurement>& measurements, std::vector<Fit> fits) {
  std::vector<std::pair<std::string, std::string>> texts;
  for (const auto& run : runs) {
    DITUNE_ASSIGN_OR_RETURN(auto t, CheckRun(run));
    texts.push_back(std::move(t));
  }
  DITUNE_ASSIGN_OR_RETURN(std::vector<std::string> params, CheckMeasurements(measurements));
  {
    std::vector<std::string> unused_params, unused_ids;  // checked now; encoded once the ids are known
    DITUNE_RETURN_IF_ERROR(EncodeFits(fits, &unused_params, &unused_ids));
  }
  std::string doing = runs.size() == 1 ? fmt::format("recording run {} and its {} measurements", runs[0].run_id,
                                                     measurements.size())
                                       : fmt::format("recording {} runs and their {} measurements", runs.size(),
                                                     measurements.size());
  if (!fits.empty()) doing += fmt::format(" with {} fits", fits.size());
  DITUNE_RETURN_IF_ERROR(CheckWritable(doing));
  DITUNE_ASSIGN_OR_RETURN(WriteTransaction txn, WriteTransaction::Begin(db_, path_, doing));
  for (size_t i = 0; i < runs.size(); ++i) DITUNE_RETURN_IF_ERROR(InsertRun(runs[i], texts[i], doing));
  DITUNE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, InsertMeasurements(measurements, params, doing));
  if (!fits.empty()) {
    for (Fit& f : fits) {
      if (f.measurement_ids.empty()) f.measurement_ids = ids;
    }
    std::vector<std::string> fit_params, fit_ids;
    DITUNE_RETURN_IF_ERROR(EncodeFits(fits, &fit_params, &fit_ids));
    DITUNE_RETURN_IF_ERROR(InsertFits(db_, path_, fits, fit_params, fit_ids).status());
  }
  DITUNE_RETURN_IF_ERROR(txn.Commit());
  return ids;
}

StatusOr<std::vector<RunRecord>> Store::Runs() const {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_,
                         "SELECT rowid, run_id, plan, predicted_s, measured_s, per_rank_s, "
                         "unix_time FROM runs ORDER BY unix_time, rowid",
                         "reading runs"));
  std::vector<RunRecord> out;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    const int64_t rowid = s.Int(0);
    RunRecord r;
    r.run_id = s.Text(1);
    r.plan = nlohmann::json::parse(s.Text(2), nullptr, /*allow_exceptions=*/false);
    if (r.plan.is_discarded()) return BadColumn(path_, "runs", rowid, "plan", "is not valid JSON");
    r.predicted_s = s.Double(3);
    r.measured_s = s.Double(4);
    nlohmann::json per_rank = nlohmann::json::parse(s.Text(5), nullptr, false);
    if (!per_rank.is_array()) {
      return BadColumn(path_, "runs", rowid, "per_rank_s", "is not a JSON array");
    }
    for (const auto& t : per_rank) {
      if (!t.is_number()) {
        return BadColumn(path_, "runs", rowid, "per_rank_s", "holds a value that is not a number");
      }
      r.per_rank_s.push_back(t.get<double>());
    }
    r.unix_time = s.Int(6);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<int64_t> Store::CalibrationVersion() const {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_, "SELECT value FROM meta WHERE name = 'calibration_version'",
                         "reading the calibration version"));
  DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Damaged(path_, "table meta has no calibration_version row");
  return s.Int(0);
}

Status Store::PutCachedPlan(const std::string& key, int64_t calibration_version,
                            const nlohmann::json& plan) {
  if (key.empty()) return Status::InvalidArgument("plan cache: the key is empty");
  DITUNE_ASSIGN_OR_RETURN(std::string text, DumpJson(plan, "cached plan " + key));
  const std::string doing = "caching a plan";
  DITUNE_RETURN_IF_ERROR(CheckWritable(doing));
  DITUNE_ASSIGN_OR_RETURN(WriteTransaction txn, WriteTransaction::Begin(db_, path_, doing));
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_,
                         "INSERT OR REPLACE INTO plan_cache (key, calibration_version, plan, "
                         "unix_time) VALUES (?, ?, ?, ?)",
                         doing));
  s.BindText(1, key);
  s.BindInt(2, calibration_version);
  s.BindText(3, text);
  s.BindInt(4, UnixNow());
  DITUNE_RETURN_IF_ERROR(s.Run());
  return txn.Commit();
}

StatusOr<std::optional<nlohmann::json>> Store::GetCachedPlan(const std::string& key,
                                                             int64_t calibration_version) const {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_,
                         "SELECT rowid, calibration_version, plan FROM plan_cache WHERE key = ?",
                         "reading the plan cache"));
  s.BindText(1, key);
  DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row || s.Int(1) != calibration_version) return std::optional<nlohmann::json>();
  nlohmann::json plan = nlohmann::json::parse(s.Text(2), nullptr, /*allow_exceptions=*/false);
  if (plan.is_discarded()) {
    return BadColumn(path_, "plan_cache", s.Int(0), "plan", "is not valid JSON");
  }
  return std::optional<nlohmann::json>(std::move(plan));
}

}  // namespace ditune
