#include "store/store_schema_impl.h"

#include <fmt/format.h>

#include <chrono>
#include <iterator>
#include <string_view>
#include <thread>

#include "store/store.h"
#include "store/store_sqlite_impl.h"

namespace ditune {
namespace store_internal {

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
static StatusOr<std::vector<std::pair<std::string, std::string>>> Columns(sqlite3* db, const std::string& path) {
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
    // SqliteError reports a held lock as the user's to resolve (InvalidArgument); whether to
    // wait again is the connection's last result code.
    const int last = sqlite3_errcode(db) & 0xff;
    const bool held = !st.ok() && (last == SQLITE_BUSY || last == SQLITE_LOCKED);
    if (!held || std::chrono::steady_clock::now() >= deadline) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

const char* MigrationSql(int64_t version) { return kMigrations[version]; }

}  // namespace store_internal

Status Store::Migrate() {
  using namespace store_internal;  // NOLINT
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
      Status migrated = Exec(db_, path_, MigrationSql(state.version), doing);
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

}  // namespace ditune
