// Move-only RAII owners of a SQLite connection, its prepared statements and its
// transactions. Every sqlite3_* return code is checked and turned into a Status whose
// message names the database file, the statement and sqlite3_errmsg, e.g.
//   runs.db: INSERT INTO profiles: database is locked
// Knows nothing of goldminer's tables (those are in core/store/run_store.cc); sqlite3.h
// stays out of this header.
//
// Threads: a Database and everything made from it are used by one thread at a time
// (the owner locks). Several Databases (connections) on one file may be used at once
// from different threads or processes; SQLite's locks and the busy timeout order them.
// Ownership: a Statement or Transaction must not outlive the Database it came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gm::sqlite {

// The Status for SQLite result `code`: SQLITE_NOTADB and SQLITE_CORRUPT are kCorrupt,
// SQLITE_BUSY and SQLITE_LOCKED kUnavailable, SQLITE_CONSTRAINT_FOREIGNKEY kNotFound
// (a row it refers to is not there), the other SQLITE_CONSTRAINTs kInvalidArgument,
// SQLITE_CANTOPEN, _IOERR, _FULL, _READONLY and _PERM kIoError, the rest kInternal.
Status StatusFromCode(int code, std::string message);

// A prepared statement. Parameters ("?") are numbered from 1, result columns from 0.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Status Bind(int index, int64_t value);
  Status Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Status Bind(int index, double value);
  Status Bind(int index, std::string_view text);
  Status Bind(int index, std::nullptr_t);
  template <typename T>
  Status Bind(int index, const std::optional<T>& value) {
    return value ? Bind(index, *value) : Bind(index, nullptr);
  }
  // Binds the arguments to parameters 1, 2, ... in order; stops at the first error.
  template <typename... Args>
  Status BindAll(const Args&... args) {
    int index = 0;
    Status status;
    ((status = status.ok() ? Bind(++index, args) : status), ...);
    return status;
  }

  // Runs one step: true when a result row is ready to read, false when done.
  Result<bool> Step();
  // Runs a statement that returns no rows (INSERT, UPDATE, ...).
  Status Run();
  // Makes the statement runnable again (bindings are kept).
  Status Reset();
  // Rows changed by the last Run() on this connection.
  int64_t Changes() const;

  // Columns of the current row (valid after Step() returned true).
  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Real(int column) const;
  std::string Text(int column) const;
  std::optional<int64_t> OptionalInt(int column) const;
  std::optional<double> OptionalReal(int column) const;
  std::optional<std::string> OptionalText(int column) const;

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::shared_ptr<const std::string> path,
            std::string label)
      : db_(db), stmt_(stmt), path_(std::move(path)), label_(std::move(label)) {}
  Status Error(int code) const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::shared_ptr<const std::string> path_;
  std::string label_;  // the statement's first words, for messages
};

// One connection to a database file.
class Database {
 public:
  // Opens the file at `path` read-write, creating it when missing. The file's
  // contents are not read until the first statement (so a file that is not a
  // database fails there, with kCorrupt).
  static Result<Database> Open(const std::string& path);

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // How long a statement waits for another connection's lock before SQLITE_BUSY.
  Status SetBusyTimeout(int milliseconds);
  // Runs one or more ';'-separated statements that return no rows. Errors name
  // `what`, or the statement's first words when `what` is empty.
  Status Exec(std::string_view sql, std::string_view what = {});
  Result<Statement> Prepare(std::string_view sql);
  // The first column of the first row of `sql` (e.g. "PRAGMA user_version").
  Result<int64_t> QueryInt(std::string_view sql);
  Result<std::string> QueryText(std::string_view sql);
  // The rowid of the last row inserted on this connection.
  int64_t LastInsertRowId() const;

  const std::string& path() const { return *path_; }
  // sqlite3_errmsg of the last failed call on this connection.
  std::string ErrorMessage() const;
  // "path: what: errmsg" with the code mapped by StatusFromCode.
  Status Error(int code, std::string_view what) const;

 private:
  Database(sqlite3* db, std::shared_ptr<const std::string> path)
      : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::shared_ptr<const std::string> path_;
};

// A write transaction: BEGIN IMMEDIATE takes the write lock at once (waiting up to
// the busy timeout), so it never fails half-way because another connection wrote
// in between. Rolled back when destroyed without Commit().
class Transaction {
 public:
  static Result<Transaction> Begin(Database& db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&& other) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_ = nullptr;  // null once committed, rolled back or moved from
};

}  // namespace gm::sqlite
