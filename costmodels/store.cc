#include "costmodels/store.h"

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
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include <unistd.h>

namespace ditune {
namespace {

// How long a write waits for another process's write transaction before giving up.
constexpr int kBusyTimeoutMs = 10'000;

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The file as a whole cannot be used; the remedy is to start afresh.
Status Damaged(const std::string& path, std::string_view detail) {
  return Status::Corruption(
      fmt::format("{} is damaged or not a ditune database: {}; move it aside and ditune will "
                  "create a new one",
                  path, detail));
}

// One stored value cannot be decoded; the rest of the file may be fine.
Status BadColumn(const std::string& path, std::string_view table, int64_t id,
                 std::string_view column, std::string_view detail) {
  return Status::Corruption(
      fmt::format("{}: table {}, row {}: column {} {}", path, table, id, column, detail));
}

// The one place an SQLite result code becomes a Status. `doing` says what was being done.
Status SqliteError(sqlite3* db, int rc, std::string_view doing, const std::string& path) {
  // sqlite3_errmsg describes the connection's latest failure; fall back to the generic
  // text when that failure is not `rc` (or there is no connection).
  const char* msg = (db != nullptr && (sqlite3_extended_errcode(db) & 0xff) == (rc & 0xff))
                        ? sqlite3_errmsg(db)
                        : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Damaged(path, fmt::format("{} while {}", msg, doing));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      // The user chooses the store: name the holder's effect and what to do.
      return Status::InvalidArgument(
          fmt::format("{}: {} while {}: another process held the database for more than {} s (let it finish, or "
                      "give another store with --db or DITUNE_DB)",
                      path, msg, doing, kBusyTimeoutMs / 1000));
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Status::InvalidArgument(
          fmt::format("{}: {} while {} (give a writable file path with --db or DITUNE_DB)", path, msg, doing));
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_NOLFS:
    case SQLITE_PROTOCOL:
      return Status::IOError(fmt::format("{}: {} while {}", path, msg, doing));
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
      return Status::InvalidArgument(fmt::format("{}: {} while {}", path, msg, doing));
    default:
      return Status::Internal(
          fmt::format("{}: SQLite error {} ({}) while {}", path, rc, msg, doing));
  }
}

// Owns one prepared statement. Bind errors are kept and reported by the next Step/Run.
class Statement {
 public:
  Statement(Statement&& o) noexcept
      : db_(o.db_),
        path_(o.path_),
        stmt_(std::exchange(o.stmt_, nullptr)),
        doing_(std::move(o.doing_)),
        bind_rc_(o.bind_rc_) {}
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  static StatusOr<Statement> Prepare(sqlite3* db, const std::string& path, std::string_view sql,
                                     std::string doing) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqliteError(db, rc, doing, path);
    }
    return Statement(db, path, stmt, std::move(doing));
  }

  // Parameters are 1-based.
  void BindInt(int i, int64_t v) { Keep(sqlite3_bind_int64(stmt_, i, v)); }
  void BindDouble(int i, double v) { Keep(sqlite3_bind_double(stmt_, i, v)); }
  void BindText(int i, std::string_view v) {
    // A null pointer would bind SQL NULL; an empty string must stay an empty string.
    const char* data = v.data() != nullptr ? v.data() : "";
    Keep(sqlite3_bind_text64(stmt_, i, data, v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }

  // True when a row is ready, false when the statement has finished.
  StatusOr<bool> Step() {
    if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, doing_, *path_);
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, doing_, *path_);
  }

  // Steps to the end, ignoring any rows.
  Status Run() {
    while (true) {
      DITUNE_ASSIGN_OR_RETURN(bool row, Step());
      if (!row) return Status::Ok();
    }
  }

  // Makes the statement ready to run again with new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    if (p == nullptr) return {};
    return std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  Statement(sqlite3* db, const std::string& path, sqlite3_stmt* stmt, std::string doing)
      : db_(db), path_(&path), stmt_(stmt), doing_(std::move(doing)) {}

  void Keep(int rc) {
    if (bind_rc_ == SQLITE_OK && rc != SQLITE_OK) bind_rc_ = rc;
  }

  sqlite3* db_;
  const std::string* path_;
  sqlite3_stmt* stmt_;
  std::string doing_;
  int bind_rc_ = SQLITE_OK;
};

// Runs SQL that returns no rows of interest (DDL, PRAGMA assignments, BEGIN/COMMIT).
Status Exec(sqlite3* db, const std::string& path, const char* sql, std::string_view doing) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, doing, path);
  return Status::Ok();
}

// A write transaction (BEGIN IMMEDIATE: the write lock is taken at the start, so two
// writers never deadlock upgrading a read lock). Rolled back unless committed.
class WriteTransaction {
 public:
  WriteTransaction(WriteTransaction&& o) noexcept
      : db_(std::exchange(o.db_, nullptr)), path_(o.path_), doing_(std::move(o.doing_)) {}
  WriteTransaction& operator=(WriteTransaction&&) = delete;
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  ~WriteTransaction() {
    // A failed COMMIT may already have rolled back; then there is nothing to undo.
    if (db_ != nullptr && sqlite3_get_autocommit(db_) == 0) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }

  static StatusOr<WriteTransaction> Begin(sqlite3* db, const std::string& path, std::string doing) {
    DITUNE_RETURN_IF_ERROR(
        Exec(db, path, "BEGIN IMMEDIATE", "starting a transaction for " + doing));
    return WriteTransaction(db, path, std::move(doing));
  }

  Status Commit() {
    DITUNE_RETURN_IF_ERROR(Exec(db_, *path_, "COMMIT", "committing " + doing_));
    db_ = nullptr;
    return Status::Ok();
  }

 private:
  WriteTransaction(sqlite3* db, const std::string& path, std::string doing)
      : db_(db), path_(&path), doing_(std::move(doing)) {}

  sqlite3* db_;
  const std::string* path_;
  std::string doing_;
};

StatusOr<std::string> DumpJson(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(fmt::format("{} cannot be stored as JSON: {}", what, e.what()));
  }
}

// ---- Schema ----------------------------------------------------------------------------

// Version 1: measurements, fits, runs and the calibration version.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE measurements (
  id INTEGER PRIMARY KEY,
  source TEXT NOT NULL,
  kind TEXT NOT NULL,
  op TEXT NOT NULL,
  backend TEXT NOT NULL,
  device TEXT NOT NULL,
  params TEXT NOT NULL,
  ranks INTEGER NOT NULL,
  link TEXT NOT NULL,
  bytes REAL NOT NULL,
  flops REAL NOT NULL,
  median_s REAL NOT NULL,
  p10_s REAL NOT NULL,
  p90_s REAL NOT NULL,
  samples INTEGER NOT NULL,
  run_id TEXT NOT NULL,
  unix_time INTEGER NOT NULL
);
CREATE INDEX measurements_kind_op_device ON measurements(kind, op, device);
CREATE TABLE fits (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  params TEXT NOT NULL,
  points INTEGER NOT NULL,
  mape REAL NOT NULL,
  measurement_ids TEXT NOT NULL,
  active INTEGER NOT NULL CHECK (active IN (0, 1)),
  unix_time INTEGER NOT NULL
);
CREATE UNIQUE INDEX fits_one_active ON fits(kind, key) WHERE active = 1;
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  plan TEXT NOT NULL,
  predicted_s REAL NOT NULL,
  measured_s REAL NOT NULL,
  per_rank_s TEXT NOT NULL,
  unix_time INTEGER NOT NULL
);
CREATE TABLE meta (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO meta(name, value) VALUES ('calibration_version', 0);
)sql";

// Version 2: the planner's plan cache.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE plan_cache (
  key TEXT PRIMARY KEY,
  calibration_version INTEGER NOT NULL,
  plan TEXT NOT NULL,
  unix_time INTEGER NOT NULL
);
)sql";

// kMigrations[v] takes a store from version v to v + 1.
constexpr const char* kMigrations[] = {kSchemaV1, kSchemaV2};
static_assert(std::size(kMigrations) == static_cast<size_t>(Store::kSchemaVersion));

// Tables a store of version v must hold (those of every version up to v).
constexpr std::string_view kTablesByVersion[][4] = {
    {"measurements", "fits", "runs", "meta"},
    {"plan_cache"},
};
static_assert(std::size(kTablesByVersion) == static_cast<size_t>(Store::kSchemaVersion));

struct SchemaState {
  int64_t version = 0;
  std::vector<std::string> tables;  // user tables, sorted
};

// Version and tables, read by one statement so that both come from one snapshot.
StatusOr<SchemaState> ReadSchemaState(sqlite3* db, const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db, path,
                         "SELECT (SELECT user_version FROM pragma_user_version), name FROM "
                         "(SELECT NULL AS name UNION ALL SELECT name FROM sqlite_master WHERE "
                         "type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\') ORDER BY name",
                         "reading the schema version"));
  SchemaState state;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    state.version = s.Int(0);
    std::string name = s.Text(1);
    if (!name.empty()) state.tables.push_back(std::move(name));
  }
  return state;
}

// The (table, column) pairs of `db`'s tables, sorted.
StatusOr<std::vector<std::pair<std::string, std::string>>> Columns(sqlite3* db, const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db, path,
                         "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p "
                         "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1, 2",
                         "reading the tables' columns"));
  std::vector<std::pair<std::string, std::string>> out;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.emplace_back(s.Text(0), s.Text(1));
  }
  return out;
}

// OK when every table of the current schema has every column this ditune reads (a store
// edited by hand may lack one): compared with the schema built afresh in memory.
Status CheckColumns(sqlite3* db, const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open(":memory:", &raw);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> ref(raw, sqlite3_close);
  if (rc != SQLITE_OK) return SqliteError(raw, rc, "building the reference schema", ":memory:");
  for (const char* migration : kMigrations) {
    DITUNE_RETURN_IF_ERROR(Exec(ref.get(), ":memory:", migration, "building the reference schema"));
  }
  DITUNE_ASSIGN_OR_RETURN(auto want, Columns(ref.get(), ":memory:"));
  DITUNE_ASSIGN_OR_RETURN(auto have, Columns(db, path));
  std::sort(have.begin(), have.end());
  for (const auto& tc : want) {
    if (!std::binary_search(have.begin(), have.end(), tc)) {
      return Status::Corruption(fmt::format(
          "{} is damaged: table '{}' has no column '{}'; move it aside or use another database (--db or DITUNE_DB)",
          path, tc.first, tc.second));
    }
  }
  return Status::Ok();
}

// OK when `state` is a ditune store this code can read (perhaps after migrating).
Status CheckSchema(const SchemaState& state, const std::string& path) {
  if (state.version > Store::kSchemaVersion) {
    return Status::InvalidArgument(fmt::format(
        "{} was written by a newer ditune (schema version {}; this ditune reads up to {}): "
        "upgrade ditune or use another database (--db or DITUNE_DB)",
        path, state.version, Store::kSchemaVersion));
  }
  if (state.version < 0) {
    return Status::Corruption(fmt::format(
        "{} is not a ditune calibration store (schema version {}); move it aside or use another "
        "database (--db or DITUNE_DB)",
        path, state.version));
  }
  auto has = [&](std::string_view t) {
    for (const auto& name : state.tables) {
      if (name == t) return true;
    }
    return false;
  };
  if (state.version == 0 && !state.tables.empty()) {
    return Status::Corruption(fmt::format(
        "{} is an SQLite database but not a ditune calibration store (it holds table '{}' and "
        "no ditune schema); move it aside or use another database (--db or DITUNE_DB)",
        path, state.tables.front()));
  }
  for (int64_t v = 0; v < state.version; ++v) {
    for (std::string_view t : kTablesByVersion[v]) {
      if (!t.empty() && !has(t)) {
        return Status::Corruption(fmt::format(
            "{} is not a ditune calibration store: schema version {} but no table '{}'; move it "
            "aside or use another database (--db or DITUNE_DB)",
            path, state.version, t));
      }
    }
  }
  return Status::Ok();
}

// PRAGMA quick_check: every b-tree page well formed. Any finding refuses the file.
Status QuickCheck(sqlite3* db, const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s, Statement::Prepare(db, path, "PRAGMA quick_check(5)", "checking integrity"));
  std::string findings;
  bool failed = false;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    // A row may hold several findings, one a line, under a "*** in database main ***" header.
    std::string text = s.Text(0);
    if (text == "ok") continue;
    failed = true;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      start = end + 1;
      if (line.empty() || line.starts_with("***")) continue;
      if (!findings.empty()) findings += "; ";
      findings += line;
    }
  }
  if (failed) {
    return Damaged(path, "integrity check failed: " + (findings.empty() ? "no details" : findings));
  }
  return Status::Ok();
}

// Switches to WAL. Changing the journal mode needs a lock that the busy handler does not
// always wait for, so retry for as long as the busy timeout would have waited.
Status EnableWal(sqlite3* db, const std::string& path) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  auto attempt = [&]() -> Status {
    DITUNE_ASSIGN_OR_RETURN(Statement s, Statement::Prepare(db, path, "PRAGMA journal_mode=WAL",
                                                            "switching to WAL mode"));
    // The row names the resulting mode; a file system without WAL support keeps its own.
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    (void)row;
    return Status::Ok();
  };
  while (true) {
    Status st = attempt();
    if (st.code() != Status::Code::kUnavailable || std::chrono::steady_clock::now() >= deadline) {
      return st;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

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
  DITUNE_RETURN_IF_ERROR(QuickCheck(db, path));
  DITUNE_ASSIGN_OR_RETURN(SchemaState state, ReadSchemaState(db, path));
  DITUNE_RETURN_IF_ERROR(CheckSchema(state, path));
  DITUNE_RETURN_IF_ERROR(EnableWal(db, path));
  // In WAL mode NORMAL still keeps every commit atomic across a crash of the process.
  DITUNE_RETURN_IF_ERROR(Exec(db, path, "PRAGMA synchronous=NORMAL", "setting synchronous mode"));
  DITUNE_RETURN_IF_ERROR(store->Migrate());
  DITUNE_RETURN_IF_ERROR(CheckColumns(db, path));
  if (!options.seed_fits.empty()) DITUNE_RETURN_IF_ERROR(store->SeedIfEmpty(options.seed_fits));
  return store;
}

Status Store::SeedIfEmpty(const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(
      Statement count,
      Statement::Prepare(db_, path_,
                         "SELECT (SELECT COUNT(*) FROM fits) + (SELECT COUNT(*) FROM measurements)",
                         "checking whether the store is new"));
  DITUNE_ASSIGN_OR_RETURN(bool row, count.Step());
  if (!row || count.Int(0) > 0) return Status::Ok();
  return ReplaceFits(fits);
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
  return Status::InvalidArgument(fmt::format(
      "the calibration store {} is open read-only (not writable here, or DITUNE_DB_READ_ONLY=1); {} writes into "
      "it: give a writable store with --db or DITUNE_DB",
      path_, doing));
}

Status Store::Migrate() {
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(SchemaState state, ReadSchemaState(db_, path_));
    DITUNE_RETURN_IF_ERROR(CheckSchema(state, path_));
    if (state.version == kSchemaVersion) return Status::Ok();

    // One step per transaction: a crash mid-migration leaves the older version whole.
    const int64_t target = state.version + 1;
    DITUNE_ASSIGN_OR_RETURN(
        WriteTransaction txn,
        WriteTransaction::Begin(db_, path_, fmt::format("migrating to schema version {}", target)));
    // Another process may have migrated while this one waited for the lock.
    DITUNE_ASSIGN_OR_RETURN(state, ReadSchemaState(db_, path_));
    DITUNE_RETURN_IF_ERROR(CheckSchema(state, path_));
    if (state.version + 1 == target) {
      const std::string doing = fmt::format("migrating to schema version {}", target);
      Status migrated = Exec(db_, path_, kMigrations[state.version], doing);
      if (!migrated.ok() && migrated.message().find("already exists") != std::string::npos) {
        // The tables of a later version are there but the version marker says otherwise: the
        // marker was rewritten (or restored) on its own. Nothing is changed.
        return Status::Corruption(fmt::format(
            "{}: its schema marker (PRAGMA user_version) says version {}, but it already holds later tables ({}): "
            "the marker is stale; restore the store from a copy or move it aside (--db or DITUNE_DB)",
            path_, state.version, migrated.message()));
      }
      DITUNE_RETURN_IF_ERROR(migrated);
      const std::string set_version = fmt::format("PRAGMA user_version = {}", target);
      DITUNE_RETURN_IF_ERROR(Exec(db_, path_, set_version.c_str(), doing));
    }
    DITUNE_RETURN_IF_ERROR(txn.Commit());
  }
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

namespace {

// Deactivates each fit's (kind, key) predecessor and inserts it, inside the caller's
// transaction; then bumps the calibration version once.
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

}  // namespace

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

StatusOr<std::vector<Fit>> Store::ActiveFits(const std::optional<std::string>& kind) const {
  DITUNE_ASSIGN_OR_RETURN(
      Statement s,
      Statement::Prepare(db_, path_,
                         fmt::format("SELECT {} FROM fits WHERE active = 1{} ORDER BY kind, key",
                                     kFitColumns, kind ? " AND kind = ?" : ""),
                         "reading active fits"));
  if (kind) s.BindText(1, *kind);
  std::vector<Fit> out;
  while (true) {
    DITUNE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    DITUNE_ASSIGN_OR_RETURN(Fit f, ReadFit(s, path_));
    out.push_back(std::move(f));
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

Status Store::AddRun(const RunRecord& run) { return RecordRuns({run}, {}).status(); }

StatusOr<std::vector<int64_t>> Store::RecordRuns(const std::vector<RunRecord>& runs,
                                                 const std::vector<Measurement>& measurements) {
  std::vector<std::pair<std::string, std::string>> texts;
  for (const auto& run : runs) {
    DITUNE_ASSIGN_OR_RETURN(auto t, CheckRun(run));
    texts.push_back(std::move(t));
  }
  DITUNE_ASSIGN_OR_RETURN(std::vector<std::string> params, CheckMeasurements(measurements));
  const std::string doing = runs.size() == 1 ? fmt::format("recording run {} and its {} measurements",
                                                           runs[0].run_id, measurements.size())
                                             : fmt::format("recording {} runs and their {} measurements",
                                                           runs.size(), measurements.size());
  DITUNE_RETURN_IF_ERROR(CheckWritable(doing));
  DITUNE_ASSIGN_OR_RETURN(WriteTransaction txn, WriteTransaction::Begin(db_, path_, doing));
  for (size_t i = 0; i < runs.size(); ++i) DITUNE_RETURN_IF_ERROR(InsertRun(runs[i], texts[i], doing));
  DITUNE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, InsertMeasurements(measurements, params, doing));
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
