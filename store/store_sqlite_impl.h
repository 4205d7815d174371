// The SQLite layer under the calibration store (store.cc): the one place an SQLite result
// code becomes a Status, RAII owners of statements and write transactions. Not part of the
// public API.
#ifndef DITUNE_STORE_STORE_SQLITE_IMPL_H_
#define DITUNE_STORE_STORE_SQLITE_IMPL_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ditune::store_internal {

// How long a write waits for another process's write transaction before giving up.
constexpr int kBusyTimeoutMs = 10'000;

// Seconds since the Unix epoch (the rows' unix_time).
int64_t UnixNow();

// The file as a whole cannot be used; the remedy is to start afresh.
Status Damaged(const std::string& path, std::string_view detail);

// One stored value cannot be decoded; the rest of the file may be fine.
Status BadColumn(const std::string& path, std::string_view table, int64_t id,
                 std::string_view column, std::string_view detail);

// The one place an SQLite result code becomes a Status. `doing` says what was being done.
Status SqliteError(sqlite3* db, int rc, std::string_view doing, const std::string& path);

// Runs SQL that returns no rows of interest (DDL, PRAGMA assignments, BEGIN/COMMIT).
Status Exec(sqlite3* db, const std::string& path, const char* sql, std::string_view doing);

// `j` as JSON text; InvalidArgument naming `what` when it cannot be written (invalid UTF-8).
StatusOr<std::string> DumpJson(const nlohmann::json& j, std::string_view what);

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

}  // namespace ditune::store_internal

#endif  // DITUNE_STORE_STORE_SQLITE_IMPL_H_
