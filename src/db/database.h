// The SQL databases Reel keeps metadata in (the registry's versions, later the scheduler's jobs):
// SQLite embedded in one file by default, PostgreSQL for a team. Both speak one portable subset
// of SQL, so one schema serves both:
//   - statements use `?` placeholders (rewritten to `$1, $2, ...` for PostgreSQL);
//   - column types TEXT, BIGINT, DOUBLE PRECISION; no auto-increment (callers number their rows
//     inside a transaction), no BLOBs (binary data lives in an ObjectStore);
//   - `INSERT ... ON CONFLICT` is avoided; a conflict is AlreadyExists.
//
// Transactions: Transact runs a function inside one write transaction (SQLite BEGIN IMMEDIATE,
// PostgreSQL SERIALIZABLE) and commits when it returns OK; it rolls back on an error and retries
// the whole function when the database reports contention (SQLite busy, PostgreSQL
// serialization failure), so several processes may write at once. The function must therefore
// have no effects outside the database.
//
// Errors: Unavailable for a database that cannot be opened or reached, and for contention that
// outlives the retries; AlreadyExists for a unique-key conflict; InvalidArgument for SQL the
// database rejects (a bug or a schema mismatch: the message names the statement). Thread-safety:
// one Database is one connection: use it from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

namespace reel::db {

// NULL, an integer, a real or text.
using Value = std::variant<std::monostate, int64_t, double, std::string>;

class Row {
 public:
  explicit Row(std::vector<Value> values) : values_(std::move(values)) {}
  size_t size() const { return values_.size(); }
  bool IsNull(size_t i) const { return std::holds_alternative<std::monostate>(At(i)); }
  // A NULL reads as 0 or "", so optional columns need IsNull first.
  int64_t Int(size_t i) const;
  double Real(size_t i) const;
  std::string Text(size_t i) const;
  // Text(i), moved out of the row (which then holds ""): listings of thousands of rows copy
  // nothing.
  std::string TakeText(size_t i);

 private:
  const Value& At(size_t i) const;
  std::vector<Value> values_;
};

enum class Dialect { kSqlite, kPostgres };

class Database {
 public:
  virtual ~Database() = default;
  virtual Dialect dialect() const = 0;

  // Runs one statement and returns its rows (none for statements that return none).
  virtual Result<std::vector<Row>> Query(std::string_view sql,
                                         const std::vector<Value>& params = {}) = 0;
  // Runs one statement and returns how many rows it changed.
  virtual Result<int64_t> Exec(std::string_view sql, const std::vector<Value>& params = {}) = 0;
  // Runs several statements without parameters (a migration's script).
  virtual Status ExecScript(std::string_view sql) = 0;

  // Runs `fn` in one write transaction, as described above.
  Status Transact(const std::function<Status()>& fn);

 protected:
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
  // A backend calls this when the database refused a statement for contention (SQLite busy,
  // PostgreSQL serialization failure or deadlock): Transact then retries the transaction.
  void NoteContention() { contended_ = true; }

 private:
  bool contended_ = false;
};

// `path`: the database file (created with its folder when missing). WAL journal, a busy
// timeout, foreign keys on.
Result<std::unique_ptr<Database>> OpenSqlite(const std::string& path);

// `conninfo`: a libpq connection string or postgresql:// URI.
Result<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo);

// Opens by URI: postgresql://..., postgres://... or a libpq "host=... dbname=..." string for
// PostgreSQL; anything else is a SQLite file path (sqlite:// prefix allowed).
Result<std::unique_ptr<Database>> Open(const std::string& uri);

// One step of a schema's history. Versions count from 1 and never change once released: a new
// schema is a new step.
struct Migration {
  int version;
  std::string sql;
};

// Brings `component`'s schema (its rows in table reel_schema) up to the last of `migrations`,
// each step in its own transaction. Errors: FailedPrecondition when the database holds a newer
// schema than this build knows (an older binary must not write a newer schema).
Status Migrate(Database& db, std::string_view component, const std::vector<Migration>& migrations);

// The schema version `component` is at (0 when never migrated).
Result<int> SchemaVersion(Database& db, std::string_view component);

}  // namespace reel::db
