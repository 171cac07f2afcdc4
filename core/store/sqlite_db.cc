#include "core/store/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

namespace gm::sqlite {
namespace {

// "INSERT INTO profiles" from "INSERT INTO profiles (a, b) VALUES (?, ?)": enough
// to tell which statement failed without quoting all of it.
std::string Label(std::string_view sql) {
  size_t start = sql.find_first_not_of(" \n\t");
  if (start == std::string_view::npos) return "";
  sql.remove_prefix(start);
  size_t end = sql.find_first_of("(\n;");
  std::string label(sql.substr(0, end == std::string_view::npos ? sql.size() : end));
  while (!label.empty() && label.back() == ' ') label.pop_back();
  if (label.size() > 60) label = label.substr(0, 57) + "...";
  return label;
}

}  // namespace

Status StatusFromCode(int code, std::string message) {
  if (code == SQLITE_CONSTRAINT_FOREIGNKEY) return Status::NotFound(std::move(message));
  switch (code & 0xff) {  // the primary code of an extended one
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return Status::Corrupt(std::move(message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(std::move(message));
    case SQLITE_CONSTRAINT:
      return Status::InvalidArgument(std::move(message));
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Status::IoError(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

// ---- Statement ---------------------------------------------------------------

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      path_(std::move(other.path_)),
      label_(std::move(other.label_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    path_ = std::move(other.path_);
    label_ = std::move(other.label_);
  }
  return *this;
}

Statement::~Statement() {
  // sqlite3_finalize repeats the last step's error, which was reported then.
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Status Statement::Error(int code) const {
  return StatusFromCode(code, *path_ + ": " + label_ + ": " + sqlite3_errmsg(db_));
}

Status Statement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  return rc == SQLITE_OK ? Status::Ok() : Error(rc);
}

Status Statement::Bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  return rc == SQLITE_OK ? Status::Ok() : Error(rc);
}

Status Statement::Bind(int index, std::string_view text) {
  int rc =
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return rc == SQLITE_OK ? Status::Ok() : Error(rc);
}

Status Statement::Bind(int index, std::nullptr_t) {
  int rc = sqlite3_bind_null(stmt_, index);
  return rc == SQLITE_OK ? Status::Ok() : Error(rc);
}

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error(rc);
}

Status Statement::Run() {
  GM_ASSIGN_OR_RETURN(bool row, Step());
  (void)row;  // a row from a statement run for its effect is ignored
  return Reset();
}

Status Statement::Reset() {
  int rc = sqlite3_reset(stmt_);
  return rc == SQLITE_OK ? Status::Ok() : Error(rc);
}

int64_t Statement::Changes() const { return sqlite3_changes64(db_); }

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::Real(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  const int bytes = sqlite3_column_bytes(stmt_, column);
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(bytes));
}

std::optional<int64_t> Statement::OptionalInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int(column);
}

std::optional<double> Statement::OptionalReal(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Real(column);
}

std::optional<std::string> Statement::OptionalText(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Text(column);
}

// ---- Database ----------------------------------------------------------------

namespace {

// Where `file`'s folder is one anyone may write to (/tmp), what SQLite opens
// there must be ours: the file is opened here first without following a link
// (O_NOFOLLOW; with `create`, made empty when missing, which SQLite takes as it
// would have made it), so that no link another user plants can be followed in the moment
// between a check and SQLite's open, and must be a regular file of our own. The
// folder must have the sticky bit, so that nobody else may rename or remove that
// file afterwards. Our own link there is followed. InvalidArgument otherwise,
// naming the file and the fix. Folders others cannot write to are not checked.
Status CheckNotPlanted(const std::string& file, bool create) {
  const size_t slash = file.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : file.substr(0, std::max<size_t>(slash, 1));
  struct stat folder {};
  if (::stat(dir.c_str(), &folder) != 0 || (folder.st_mode & S_IWOTH) == 0) return Status::Ok();
  const std::string fix = "; remove it, or give the database's path in a folder of your own";
  if ((folder.st_mode & S_ISVTX) == 0) {
    return Status::InvalidArgument(file + ": its folder " + dir +
                                   " may be written by anyone and has no sticky bit, so another "
                                   "user may replace the database there; give a path in a "
                                   "folder of your own");
  }
  const int fd =
      ::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  if (fd < 0) {
    struct stat link {};
    // ELOOP, or EACCES where the kernel protects such links (fs.protected_symlinks).
    if (::lstat(file.c_str(), &link) != 0 || !S_ISLNK(link.st_mode) || link.st_uid == ::geteuid()) {
      return Status::Ok();  // our own link, or what SQLite will report itself
    }
    return Status::InvalidArgument(
        file + " is a symbolic link owned by uid " + std::to_string(link.st_uid) + " in " + dir +
        ", a folder anyone may write to: it is not followed (another user may have planted it)" +
        fix);
  }
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (stated && S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) return Status::Ok();
  return Status::InvalidArgument(file + " in " + dir + ", a folder anyone may write to, " +
                                 (stated && !S_ISREG(st.st_mode)
                                      ? std::string("is not a regular file")
                                      : "belongs to uid " + std::to_string(st.st_uid)) +
                                 ": another user may have put it there" + fix);
}

}  // namespace

Result<Database> Database::Open(const std::string& path) {
  // SQLite also writes PATH-wal, PATH-shm and PATH-journal beside the file.
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    // The rollback journal is not made ahead: in WAL mode it would stay behind.
    GM_RETURN_IF_ERROR(CheckNotPlanted(path + suffix, std::string_view(suffix) != "-journal"));
  }
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    // A handle is returned even on failure (except out of memory); it holds the message.
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return StatusFromCode(rc, path + ": cannot open: " + message);
  }
  sqlite3_extended_result_codes(db, 1);
  return Database(db, std::make_shared<const std::string>(path));
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Database::~Database() {
  // close_v2 defers the close until the last statement is finalized; nothing to
  // report from a destructor (every write was checked when it ran).
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

std::string Database::ErrorMessage() const { return sqlite3_errmsg(db_); }

Status Database::Error(int code, std::string_view what) const {
  return StatusFromCode(code, *path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_));
}

Status Database::SetBusyTimeout(int milliseconds) {
  int rc = sqlite3_busy_timeout(db_, milliseconds);
  return rc == SQLITE_OK ? Status::Ok() : Error(rc, "setting the busy timeout");
}

Status Database::Exec(std::string_view sql, std::string_view what) {
  const std::string text(sql);  // sqlite3_exec needs a NUL-terminated string
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return Status::Ok();
  return Error(rc, what.empty() ? Label(sql) : std::string(what));
}

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, Label(sql));
  }
  return Statement(db_, stmt, path_, Label(sql));
}

Result<int64_t> Database::QueryInt(std::string_view sql) {
  GM_ASSIGN_OR_RETURN(Statement st, Prepare(sql));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::Internal(path() + ": " + Label(sql) + ": returned no row");
  return st.Int(0);
}

Result<std::string> Database::QueryText(std::string_view sql) {
  GM_ASSIGN_OR_RETURN(Statement st, Prepare(sql));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::Internal(path() + ": " + Label(sql) + ": returned no row");
  return st.Text(0);
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

// ---- Transaction -------------------------------------------------------------

Result<Transaction> Transaction::Begin(Database& db) {
  GM_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  // Only reached on an error path, whose Status is already on its way up; a failed
  // ROLLBACK leaves SQLite to roll back when the connection closes.
  if (db_ != nullptr) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  Database* db = std::exchange(db_, nullptr);
  Status status = db->Exec("COMMIT");
  // A failed COMMIT (e.g. SQLITE_BUSY) leaves the transaction open: end it.
  if (!status.ok()) (void)db->Exec("ROLLBACK");
  return status;
}

}  // namespace gm::sqlite
