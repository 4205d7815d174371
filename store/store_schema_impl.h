// The calibration store's schema: its versions, the forward migrations between them, and the
// checks a file must pass before it is used. Not part of the public API.
#ifndef DITUNE_STORE_STORE_SCHEMA_IMPL_H_
#define DITUNE_STORE_STORE_SCHEMA_IMPL_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ditune::store_internal {

struct SchemaState {
  int64_t version = 0;
  std::vector<std::string> tables;  // user tables, sorted
};

// Version and tables, read by one statement so that both come from one snapshot.
StatusOr<SchemaState> ReadSchemaState(sqlite3* db, const std::string& path);

// OK when every table of the current schema has every column this ditune reads (a store
// edited by hand may lack one): compared with the schema built afresh in memory.
Status CheckColumns(sqlite3* db, const std::string& path);

// OK when `state` is a ditune store this code can read (perhaps after migrating).
Status CheckSchema(const SchemaState& state, const std::string& path);

// PRAGMA quick_check: every b-tree page well formed. Any finding refuses the file.
Status QuickCheck(sqlite3* db, const std::string& path);

// Switches to WAL. Changing the journal mode needs a lock that the busy handler does not
// always wait for, so retry for as long as the busy timeout would have waited.
Status EnableWal(sqlite3* db, const std::string& path);

// The SQL that takes a store from schema version `version` to `version` + 1
// (0 <= version < Store::kSchemaVersion).
const char* MigrationSql(int64_t version);

}  // namespace ditune::store_internal

#endif  // DITUNE_STORE_STORE_SCHEMA_IMPL_H_
