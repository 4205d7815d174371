#include "store/store_sqlite_impl.h"

#include <fmt/format.h>

#include <chrono>

namespace ditune::store_internal {

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
      if (rc == SQLITE_BUSY_SNAPSHOT) {
        // Not a held lock: this connection's read snapshot went stale before it could write.
        return Status::InvalidArgument(
            fmt::format("{}: {} while {}: another process wrote to the database while this one was reading it "
                        "(run again)",
                        path, msg, doing));
      }
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

// Runs SQL that returns no rows of interest (DDL, PRAGMA assignments, BEGIN/COMMIT).
Status Exec(sqlite3* db, const std::string& path, const char* sql, std::string_view doing) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, doing, path);
  return Status::Ok();
}

StatusOr<std::string> DumpJson(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(fmt::format("{} cannot be stored as JSON: {}", what, e.what()));
  }
}

}  // namespace ditune::store_internal
