// The SQLite provider: one connection to one file, WAL journal so readers never block the
// writer, BEGIN IMMEDIATE so that two writers queue on the busy timeout instead of deadlocking
// when both would upgrade a read lock.
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "base/check.h"
#include "db/database.h"

namespace reel::db {
namespace {

constexpr int kBusyTimeoutMs = 10000;

struct StmtCloser {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtCloser>;

class SqliteDatabase final : public Database {
 public:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }
  Dialect dialect() const override { return Dialect::kSqlite; }

  Result<std::vector<Row>> Query(std::string_view sql, const std::vector<Value>& params) override {
    REEL_ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql, params));
    std::vector<Row> rows;
    for (;;) {
      const int rc = sqlite3_step(stmt.get());
      if (rc == SQLITE_DONE) return rows;
      if (rc != SQLITE_ROW) return Error(rc, sql);
      rows.push_back(ReadRow(stmt.get()));
    }
  }

  Result<int64_t> Exec(std::string_view sql, const std::vector<Value>& params) override {
    REEL_RETURN_IF_ERROR(Query(sql, params).status());
    return static_cast<int64_t>(sqlite3_changes(db_));
  }

  Status ExecScript(std::string_view sql) override {
    const std::string text(sql);
    const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? Status::Ok() : Error(rc, sql);
  }

  Status Configure() {
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    sqlite3_extended_result_codes(db_, 1);
    // FULL: a committed version survives a power cut, not just a crash of the process. Reads
    // through a memory map: a listing of thousands of rows then copies no pages (half its time).
    return ExecScript(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
        "PRAGMA mmap_size = 268435456;");
  }

 protected:
  Status Begin() override { return ExecScript("BEGIN IMMEDIATE"); }
  Status Commit() override { return ExecScript("COMMIT"); }
  void Rollback() override {
    if (!sqlite3_get_autocommit(db_)) ExecScript("ROLLBACK").IgnoreError();  // best effort
  }

 private:
  Result<Stmt> Prepare(std::string_view sql, const std::vector<Value>& params) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    Stmt stmt(raw);
    if (rc != SQLITE_OK) return Error(rc, sql);
    const int expected = sqlite3_bind_parameter_count(raw);
    if (expected != static_cast<int>(params.size())) {
      return InvalidArgumentError("sql: " + std::to_string(params.size()) +
                                  " parameters for a statement of " + std::to_string(expected) +
                                  ": " + std::string(sql));
    }
    for (size_t i = 0; i < params.size(); ++i) Bind(raw, static_cast<int>(i) + 1, params[i]);
    return stmt;
  }

  static void Bind(sqlite3_stmt* stmt, int index, const Value& v) {
    if (const auto* x = std::get_if<int64_t>(&v)) {
      sqlite3_bind_int64(stmt, index, *x);
    } else if (const auto* x = std::get_if<double>(&v)) {
      sqlite3_bind_double(stmt, index, *x);
    } else if (const auto* x = std::get_if<std::string>(&v)) {
      sqlite3_bind_text(stmt, index, x->data(), static_cast<int>(x->size()), SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_null(stmt, index);
    }
  }

  static Row ReadRow(sqlite3_stmt* stmt) {
    std::vector<Value> values;
    const int n = sqlite3_column_count(stmt);
    values.reserve(n);
    for (int i = 0; i < n; ++i) {
      switch (sqlite3_column_type(stmt, i)) {
        case SQLITE_INTEGER:
          values.emplace_back(static_cast<int64_t>(sqlite3_column_int64(stmt, i)));
          break;
        case SQLITE_FLOAT:
          values.emplace_back(sqlite3_column_double(stmt, i));
          break;
        case SQLITE_NULL:
          values.emplace_back(std::monostate{});
          break;
        default: {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
          values.emplace_back(std::string(text, sqlite3_column_bytes(stmt, i)));
        }
      }
    }
    return Row(std::move(values));
  }

  Status Error(int rc, std::string_view sql) {
    const std::string message =
        std::string(sqlite3_errmsg(db_)) + " (in: " + std::string(sql.substr(0, 200)) + ")";
    switch (rc & 0xff) {
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        NoteContention();
        return UnavailableError("sqlite busy: " + message);
      case SQLITE_CONSTRAINT:
        if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
          return AlreadyExistsError("sqlite: " + message);
        }
        return FailedPreconditionError("sqlite: " + message);
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
        return DataLossError("sqlite: " + message);
      case SQLITE_FULL:
        return ResourceExhaustedError("sqlite: " + message);
      case SQLITE_CANTOPEN:
      case SQLITE_IOERR:
      case SQLITE_READONLY:
      case SQLITE_PERM:
        return UnavailableError("sqlite: " + message);
      default:
        return InvalidArgumentError("sqlite: " + message);
    }
  }

  sqlite3* db_;
};

}  // namespace

Result<std::unique_ptr<Database>> OpenSqlite(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return UnavailableError(path + ": cannot create its folder: " + ec.message());
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    return UnavailableError(path + ": cannot open the SQLite database: " + message);
  }
  auto db = std::make_unique<SqliteDatabase>(raw);
  Status configured = db->Configure();
  if (!configured.ok()) return Status(configured.code(), path + ": " + configured.message());
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace reel::db
