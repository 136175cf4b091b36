// One suite, two databases: SQLite in a temp dir (always), and a real PostgreSQL server when
// REEL_TEST_POSTGRES names one (ctest's "postgres" fixture starts it for db_postgres_test).
#include "db/database.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "db/testing/test_database.h"
#include "testing/processes.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::db {
namespace {

using reel::testing::TempDir;

class DatabaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = testing::TestDatabase::Make(GetParam());
    if (!backend_) GTEST_SKIP() << "REEL_TEST_POSTGRES is not set (db_postgres_test)";
    auto db = Open(Uri());
    ASSERT_OK(db);
    db_ = std::move(db).value();
  }
  void TearDown() override { db_.reset(); }
  std::string Uri() { return backend_->Uri(); }

  std::unique_ptr<testing::TestDatabase> backend_;
  std::unique_ptr<Database> db_;
};

const std::vector<Migration> kSchema = {
    {1,
     "CREATE TABLE item (name TEXT PRIMARY KEY, n BIGINT NOT NULL, x DOUBLE PRECISION, "
     "note TEXT)"},
    {2,
     "CREATE TABLE counter (id BIGINT PRIMARY KEY, value BIGINT NOT NULL);"
     "INSERT INTO counter (id, value) VALUES (1, 0)"},
};

// The test database's URI (for PostgreSQL a libpq "host=... dbname=..." string) opens the
// backend it names, never a SQLite file of that name.
TEST_P(DatabaseTest, TheUriOpensTheBackendAskedFor) {
  EXPECT_EQ(db_->dialect(), GetParam() == "postgres" ? Dialect::kPostgres : Dialect::kSqlite);
}

TEST_P(DatabaseTest, MigratesOnceAndInOrder) {
  ASSERT_OK_AND_ASSIGN(int before, SchemaVersion(*db_, "test"));
  EXPECT_EQ(before, 0);
  ASSERT_OK(Migrate(*db_, "test", {kSchema[0]}));
  ASSERT_OK_AND_ASSIGN(int one, SchemaVersion(*db_, "test"));
  EXPECT_EQ(one, 1);
  ASSERT_OK(Migrate(*db_, "test", kSchema));
  ASSERT_OK(Migrate(*db_, "test", kSchema));  // a second run changes nothing
  ASSERT_OK_AND_ASSIGN(auto rows, db_->Query("SELECT value FROM counter"));
  ASSERT_EQ(rows.size(), 1u);  // step 2's insert ran once
  ASSERT_OK_AND_ASSIGN(int two, SchemaVersion(*db_, "test"));
  EXPECT_EQ(two, 2);
  ASSERT_OK_AND_ASSIGN(int other, SchemaVersion(*db_, "other"));
  EXPECT_EQ(other, 0);  // components keep their own versions
}

TEST_P(DatabaseTest, RefusesASchemaNewerThanThisBuild) {
  ASSERT_OK(Migrate(*db_, "test", kSchema));
  Status older = Migrate(*db_, "test", {kSchema[0]});
  EXPECT_STATUS(older, StatusCode::kFailedPrecondition);
  EXPECT_NE(older.message().find("newer than this build"), std::string::npos) << older.message();
}

TEST_P(DatabaseTest, AFailedStepLeavesTheSchemaWhereItWas) {
  ASSERT_OK(Migrate(*db_, "test", {kSchema[0]}));
  std::vector<Migration> broken = {kSchema[0], {2, "CREATE TABLE half (a TEXT); NOT SQL"}};
  EXPECT_FALSE(Migrate(*db_, "test", broken).ok());
  ASSERT_OK_AND_ASSIGN(int version, SchemaVersion(*db_, "test"));
  EXPECT_EQ(version, 1);
  EXPECT_FALSE(db_->Query("SELECT a FROM half").ok());  // the step's first statement rolled back
}

TEST_P(DatabaseTest, ValuesRoundTripWithTheirTypes) {
  ASSERT_OK(Migrate(*db_, "test", kSchema));
  ASSERT_OK_AND_ASSIGN(int64_t changed,
                       db_->Exec("INSERT INTO item (name, n, x, note) VALUES (?, ?, ?, ?)",
                                 {std::string("it's ?"), int64_t{1} << 40, 0.1, std::monostate{}}));
  EXPECT_EQ(changed, 1);
  ASSERT_OK_AND_ASSIGN(auto rows,
                       db_->Query("SELECT name, n, x, note FROM item WHERE n > ?", {int64_t{5}}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].Text(0), "it's ?");  // a ? inside a value is data, not a placeholder
  EXPECT_EQ(rows[0].Int(1), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(rows[0].Real(2), 0.1);
  EXPECT_TRUE(rows[0].IsNull(3));
  EXPECT_EQ(rows[0].TakeText(0), "it's ?");
  EXPECT_EQ(rows[0].Text(0), "") << "taken";
  EXPECT_EQ(rows[0].TakeText(1), std::to_string(int64_t{1} << 40)) << "a number reads as text";
  EXPECT_EQ(rows[0].Int(1), int64_t{1} << 40) << "and stays";
  ASSERT_OK_AND_ASSIGN(auto quoted, db_->Query("SELECT COUNT(*) FROM item WHERE name <> 'x?'"));
  EXPECT_EQ(quoted[0].Int(0), 1);
}

TEST_P(DatabaseTest, ADuplicateKeyIsAlreadyExists) {
  ASSERT_OK(Migrate(*db_, "test", kSchema));
  const std::string insert = "INSERT INTO item (name, n) VALUES (?, ?)";
  ASSERT_OK(db_->Exec(insert, {std::string("a"), int64_t{1}}));
  EXPECT_STATUS(db_->Exec(insert, {std::string("a"), int64_t{2}}), StatusCode::kAlreadyExists);
}

TEST_P(DatabaseTest, BadSqlIsInvalidArgumentNamingTheStatement) {
  Result<std::vector<Row>> r = db_->Query("SELEKT 1");
  EXPECT_STATUS(r, StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("SELEKT 1"), std::string::npos) << r.status().message();
}

TEST_P(DatabaseTest, AFailedTransactionChangesNothing) {
  ASSERT_OK(Migrate(*db_, "test", kSchema));
  Status status = db_->Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(db_->Exec("UPDATE counter SET value = 7").status());
    REEL_RETURN_IF_ERROR(db_->Exec("INSERT INTO item (name, n) VALUES ('a', 1)").status());
    return NotFoundError("changed my mind");
  });
  EXPECT_STATUS(status, StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(auto rows, db_->Query("SELECT value FROM counter"));
  EXPECT_EQ(rows[0].Int(0), 0);
  ASSERT_OK_AND_ASSIGN(auto items, db_->Query("SELECT COUNT(*) FROM item"));
  EXPECT_EQ(items[0].Int(0), 0);
}

// Read-modify-write from several processes at once: every increment lands exactly once.
TEST_P(DatabaseTest, ConcurrentWritersFromSeveralProcessesLoseNothing) {
  ASSERT_OK(Migrate(*db_, "test", kSchema));
  constexpr int kProcs = 4, kEach = 25;
  const std::string uri = Uri();
  const int failed = reel::testing::FailedChildren(kProcs, [&](int p) {
    auto db = Open(uri);
    if (!db.ok()) return 10;
    Database& d = **db;
    for (int i = 0; i < kEach; ++i) {
      Status s = d.Transact([&]() -> Status {
        REEL_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT value FROM counter WHERE id = 1"));
        const int64_t next = rows.at(0).Int(0) + 1;
        REEL_RETURN_IF_ERROR(d.Exec("UPDATE counter SET value = ? WHERE id = 1", {next}).status());
        return d
            .Exec("INSERT INTO item (name, n) VALUES (?, ?)",
                  {std::to_string(p) + "-" + std::to_string(i), next})
            .status();
      });
      if (!s.ok()) {
        std::fprintf(stderr, "child %d: %s\n", p, s.ToString().c_str());
        return 11;
      }
    }
    return 0;
  });
  EXPECT_EQ(failed, 0);
  ASSERT_OK_AND_ASSIGN(auto rows, db_->Query("SELECT value FROM counter"));
  EXPECT_EQ(rows[0].Int(0), kProcs * kEach);
  ASSERT_OK_AND_ASSIGN(auto items, db_->Query("SELECT COUNT(DISTINCT n) FROM item"));
  EXPECT_EQ(items[0].Int(0), kProcs * kEach);  // every increment saw the one before it
}

INSTANTIATE_TEST_SUITE_P(Sqlite, DatabaseTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, DatabaseTest, ::testing::Values("postgres"));

TEST(SqliteOpen, AFolderOrAFileOfOtherBytesIsAClearError) {
  TempDir dir;
  Result<std::unique_ptr<Database>> folder = OpenSqlite(dir.path());
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find(dir.path()), std::string::npos);
  const std::string junk = dir.path() + "/junk.db";
  std::ofstream(junk) << std::string(4096, 'x');
  Result<std::unique_ptr<Database>> db = OpenSqlite(junk);
  EXPECT_STATUS(db, StatusCode::kDataLoss);
  EXPECT_NE(db.status().message().find(junk), std::string::npos) << db.status().message();
}

TEST(PostgresOpen, AnUnreachableServerIsUnavailable) {
  TempDir dir;  // no server listens on a socket in an empty folder
  const std::string conninfo = "host=" + dir.path() + " port=5432 user=reel connect_timeout=2";
  EXPECT_STATUS(OpenPostgres(conninfo), StatusCode::kUnavailable);
  EXPECT_STATUS(Open(conninfo), StatusCode::kUnavailable);
  EXPECT_STATUS(Open("postgresql:///reel?host=" + dir.path()), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace reel::db
