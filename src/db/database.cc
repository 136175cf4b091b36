#include "db/database.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "base/check.h"
#include "base/logging.h"

namespace reel::db {

const Value& Row::At(size_t i) const {
  REEL_CHECK(i < values_.size()) << "column " << i << " of a row of " << values_.size();
  return values_[i];
}

int64_t Row::Int(size_t i) const {
  const Value& v = At(i);
  if (const auto* x = std::get_if<int64_t>(&v)) return *x;
  if (const auto* x = std::get_if<double>(&v)) return static_cast<int64_t>(*x);
  if (const auto* x = std::get_if<std::string>(&v)) return std::stoll(*x);
  return 0;
}

double Row::Real(size_t i) const {
  const Value& v = At(i);
  if (const auto* x = std::get_if<double>(&v)) return *x;
  if (const auto* x = std::get_if<int64_t>(&v)) return static_cast<double>(*x);
  if (const auto* x = std::get_if<std::string>(&v)) return std::stod(*x);
  return 0;
}

std::string Row::Text(size_t i) const {
  const Value& v = At(i);
  if (const auto* x = std::get_if<std::string>(&v)) return *x;
  if (const auto* x = std::get_if<int64_t>(&v)) return std::to_string(*x);
  if (const auto* x = std::get_if<double>(&v)) return std::to_string(*x);
  return {};
}

std::string Row::TakeText(size_t i) {
  if (auto* x = std::get_if<std::string>(&values_.at(i))) return std::move(*x);
  return Text(i);
}

namespace {

// 0.5-2.5 ms, times the attempt up to 10: random per process, so that two processes that lost
// to each other do not retry in lockstep (scheduling noise is not a source of randomness here).
std::chrono::microseconds RetryPause(int attempt) {
  static thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int> pause_us(500, 2500);
  return std::chrono::microseconds(pause_us(rng) * std::min(attempt + 1, 10));
}

}  // namespace

Status Database::Transact(const std::function<Status()>& fn) {
  // Contention is brief (another writer's transaction): SQLite's busy timeout waits inside a
  // try; a PostgreSQL serialization failure is retried after a short, jittered pause so that the
  // losers of one round do not collide again in the next.
  constexpr int kTries = 30;
  Status last;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    contended_ = false;
    last = Begin();
    if (last.ok()) {
      last = fn();
      if (last.ok()) last = Commit();
      if (last.ok()) return last;
      Rollback();
    }
    if (!contended_) return last;
    std::this_thread::sleep_for(RetryPause(attempt));
    Logger("db")->debug("transaction contended, retrying ({}/{}): {}", attempt + 1, kTries,
                        last.message());
  }
  return UnavailableError("database busy: a transaction was contended " + std::to_string(kTries) +
                          " times: " + last.message());
}

namespace {

// libpq's "keyword=value ..." form: the first word names a connection keyword.
bool IsConninfo(const std::string& uri) {
  const std::string first = uri.substr(0, uri.find_first_of(" ="));
  static const char* const kKeywords[] = {"host",    "hostaddr",       "port",    "dbname",
                                          "user",    "password",       "service", "sslmode",
                                          "options", "connect_timeout"};
  if (uri.size() <= first.size() || uri[first.size()] != '=') return false;
  return std::any_of(std::begin(kKeywords), std::end(kKeywords),
                     [&](const char* k) { return first == k; });
}

}  // namespace

Result<std::unique_ptr<Database>> Open(const std::string& uri) {
  auto starts = [&](const char* prefix) { return uri.rfind(prefix, 0) == 0; };
  if (starts("postgresql://") || starts("postgres://") || IsConninfo(uri)) {
    return OpenPostgres(uri);
  }
  if (starts("sqlite://")) return OpenSqlite(uri.substr(9));
  return OpenSqlite(uri);
}

namespace {

Status EnsureSchemaTable(Database& db) {
  return db.ExecScript(
      "CREATE TABLE IF NOT EXISTS reel_schema ("
      " component TEXT PRIMARY KEY,"
      " version BIGINT NOT NULL)");
}

// Inside a transaction: serializes migrations of one database across processes.
Status LockSchema(Database& db) {
  if (db.dialect() != Dialect::kPostgres) return Status::Ok();  // BEGIN IMMEDIATE already did
  return db.Query("SELECT pg_advisory_xact_lock(7274200114)").status();
}

Status ApplyStep(Database& db, std::string_view component, const Migration& step) {
  return db.Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(LockSchema(db));
    REEL_ASSIGN_OR_RETURN(int current, SchemaVersion(db, component));
    if (current >= step.version) return Status::Ok();  // another process got here first
    REEL_RETURN_IF_ERROR(db.ExecScript(step.sql));
    if (current == 0) {
      return db
          .Exec("INSERT INTO reel_schema (component, version) VALUES (?, ?)",
                {std::string(component), int64_t{step.version}})
          .status();
    }
    return db
        .Exec("UPDATE reel_schema SET version = ? WHERE component = ?",
              {int64_t{step.version}, std::string(component)})
        .status();
  });
}

}  // namespace

Result<int> SchemaVersion(Database& db, std::string_view component) {
  REEL_RETURN_IF_ERROR(EnsureSchemaTable(db));
  REEL_ASSIGN_OR_RETURN(
      std::vector<Row> rows,
      db.Query("SELECT version FROM reel_schema WHERE component = ?", {std::string(component)}));
  return rows.empty() ? 0 : static_cast<int>(rows[0].Int(0));
}

Status Migrate(Database& db, std::string_view component, const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    REEL_CHECK(migrations[i].version == static_cast<int>(i) + 1)
        << component << " migration " << i << " has version " << migrations[i].version;
  }
  REEL_ASSIGN_OR_RETURN(int current, SchemaVersion(db, component));
  const int latest = static_cast<int>(migrations.size());
  if (current > latest) {
    return FailedPreconditionError(std::string(component) + " schema is at version " +
                                   std::to_string(current) + ", newer than this build's " +
                                   std::to_string(latest) + ": upgrade reel");
  }
  for (const Migration& step : migrations) {
    if (step.version <= current) continue;
    REEL_RETURN_IF_ERROR(ApplyStep(db, component, step));
  }
  return Status::Ok();
}

}  // namespace reel::db
