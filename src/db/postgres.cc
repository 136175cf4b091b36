// The PostgreSQL provider, on libpq: `?` placeholders become `$n`, parameters and results travel
// as text and come back typed by column type, SERIALIZABLE transactions retried on
// serialization failures and deadlocks.
#include <libpq-fe.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "db/database.h"

namespace reel::db {
namespace {

// Column type OIDs (pg_type.oid) read back as numbers.
constexpr Oid kBoolOid = 16, kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23;
constexpr Oid kFloat4Oid = 700, kFloat8Oid = 701, kNumericOid = 1700;

struct ResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultCloser>;

// `?` outside quotes and identifiers becomes $1, $2, ...
std::string NumberPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  char quote = 0;
  int n = 0;
  for (char c : sql) {
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '?') {
      out += '$' + std::to_string(++n);
      continue;
    }
    out += c;
  }
  return out;
}

std::string ParamText(const Value& v) {
  if (const auto* x = std::get_if<int64_t>(&v)) return std::to_string(*x);
  if (const auto* x = std::get_if<double>(&v)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", *x);
    return buf;
  }
  return std::get<std::string>(v);
}

Value CellValue(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return std::monostate{};
  const std::string text(PQgetvalue(r, row, col), PQgetlength(r, row, col));
  switch (PQftype(r, col)) {
    case kInt2Oid:
    case kInt4Oid:
    case kInt8Oid:
      return static_cast<int64_t>(std::stoll(text));
    case kBoolOid:
      return static_cast<int64_t>(text == "t" ? 1 : 0);
    case kFloat4Oid:
    case kFloat8Oid:
    case kNumericOid:
      return std::stod(text);
    default:
      return text;
  }
}

class PostgresDatabase final : public Database {
 public:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) {}
  ~PostgresDatabase() override { PQfinish(conn_); }
  Dialect dialect() const override { return Dialect::kPostgres; }

  Result<std::vector<Row>> Query(std::string_view sql, const std::vector<Value>& params) override {
    REEL_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    std::vector<Row> rows;
    const int n = PQntuples(r.get()), cols = PQnfields(r.get());
    rows.reserve(n);
    for (int i = 0; i < n; ++i) {
      std::vector<Value> values;
      values.reserve(cols);
      for (int c = 0; c < cols; ++c) values.push_back(CellValue(r.get(), i, c));
      rows.emplace_back(std::move(values));
    }
    return rows;
  }

  Result<int64_t> Exec(std::string_view sql, const std::vector<Value>& params) override {
    REEL_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    const char* changed = PQcmdTuples(r.get());
    return static_cast<int64_t>(*changed ? std::stoll(changed) : 0);
  }

  Status ExecScript(std::string_view sql) override {
    const std::string text(sql);
    PgResult r(PQexec(conn_, text.c_str()));
    return Check(r.get(), sql);
  }

 protected:
  Status Begin() override { return ExecScript("BEGIN ISOLATION LEVEL SERIALIZABLE"); }
  Status Commit() override { return ExecScript("COMMIT"); }
  void Rollback() override { ExecScript("ROLLBACK").IgnoreError(); }  // best effort

 private:
  Result<PgResult> Run(std::string_view sql, const std::vector<Value>& params) {
    const std::string text = NumberPlaceholders(sql);
    std::vector<std::string> texts(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      if (std::holds_alternative<std::monostate>(params[i])) continue;
      texts[i] = ParamText(params[i]);
      values[i] = texts[i].c_str();
    }
    PgResult r(PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), nullptr,
                            values.data(), nullptr, nullptr, 0));
    REEL_RETURN_IF_ERROR(Check(r.get(), sql));
    return r;
  }

  Status Check(const PGresult* r, std::string_view sql) {
    const ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
      return Status::Ok();
    }
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const std::string code = state ? state : "";
    std::string message = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    message = "postgres: " + message + " (in: " + std::string(sql.substr(0, 200)) + ")";
    if (PQstatus(conn_) != CONNECTION_OK) return UnavailableError(message);
    if (code == "40001" || code == "40P01") {
      NoteContention();
      return UnavailableError(message);
    }
    if (code == "23505") return AlreadyExistsError(message);
    if (code.rfind("23", 0) == 0) return FailedPreconditionError(message);
    if (code.rfind("08", 0) == 0 || code.rfind("57", 0) == 0) return UnavailableError(message);
    if (code == "53100") return ResourceExhaustedError(message);
    return InvalidArgumentError(message);
  }

  PGconn* conn_;
};

}  // namespace

Result<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (conn == nullptr) return UnavailableError("postgres: out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    PQfinish(conn);
    return UnavailableError("postgres: cannot connect: " + message);
  }
  auto db = std::make_unique<PostgresDatabase>(conn);
  // Notices ("relation already exists, skipping") are not errors; keep them off stderr.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace reel::db
