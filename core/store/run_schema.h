// runs.db's schema: the tables, one migration per version, and opening a file
// (WAL, foreign keys, the busy timeout) with its schema created or moved forward.
// man/goldminer-runs.db.5 documents the tables for people.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/store/sqlite_db.h"

namespace gm {

// The runs.db schema version this goldminer writes and reads (PRAGMA user_version).
inline constexpr int kRunStoreSchemaVersion = 5;

// Milliseconds a connection waits for another's write before failing.
inline constexpr int kRunStoreBusyTimeoutMs = 5000;

// SQLite says only "unable to open database file": IoError saying which directory
// of `path` is missing, or Ok.
Status CheckRunsDbDirectory(const std::string& path);
// InvalidArgument naming both versions when `version` is newer than this goldminer's.
Status CheckNotNewer(const sqlite::Database& db, int64_t version);
// The SQL of schema versions 1..version in order, as a file of that version was made
// (without the data migrations add), for tests that build an older runs.db.
std::string SchemaSqlUpTo(int version);
// Sets the connection up (busy timeout, WAL, foreign keys) and creates or migrates
// the schema in one transaction. Corrupt for a file that is not a database,
// InvalidArgument for a database of some other program's.
Status PrepareRunsDb(sqlite::Database& db);

}  // namespace gm
