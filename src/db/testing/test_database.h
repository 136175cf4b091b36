// Test support: a fresh, empty database per test, on SQLite (a file in a temp dir) or on the real
// PostgreSQL server ctest's "postgres" fixture started (REEL_TEST_POSTGRES: a conninfo; each
// test gets its own database there, dropped afterwards). Header-only; tests only.
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, MyTest, ::testing::Values("sqlite"));
//   INSTANTIATE_TEST_SUITE_P(Postgres, MyTest, ::testing::Values("postgres"));
//   ... in SetUp: db_ = TestDatabase::Make(GetParam()); if (!db_) GTEST_SKIP() << ...;
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "base/check.h"
#include "db/database.h"
#include "testing/temp_dir.h"

namespace reel::db::testing {

class TestDatabase {
 public:
  virtual ~TestDatabase() = default;
  // The test's database, for db::Open (and for other processes of the test to open).
  virtual std::string Uri() const = 0;

  // "sqlite" or "postgres"; null for "postgres" when no server was started.
  static std::unique_ptr<TestDatabase> Make(const std::string& kind);
};

class SqliteTestDatabase : public TestDatabase {
 public:
  std::string Uri() const override { return dir_.path() + "/meta/registry.db"; }
  const std::string& dir() const { return dir_.path(); }

 private:
  reel::testing::TempDir dir_;
};

class PostgresTestDatabase : public TestDatabase {
 public:
  explicit PostgresTestDatabase(std::string server) : server_(std::move(server)) {
    static int counter = 0;
    name_ = "reel_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    auto admin = OpenPostgres(server_);
    REEL_CHECK(admin.ok()) << admin.status().ToString();
    Status created = (*admin)->ExecScript("CREATE DATABASE " + name_);
    REEL_CHECK(created.ok()) << created.ToString();
  }
  ~PostgresTestDatabase() override {
    auto admin = OpenPostgres(server_);
    if (admin.ok()) (*admin)->ExecScript("DROP DATABASE " + name_ + " WITH (FORCE)").IgnoreError();
  }
  // libpq takes the last of repeated keywords.
  std::string Uri() const override { return server_ + " dbname=" + name_; }

 private:
  std::string server_, name_;
};

inline std::unique_ptr<TestDatabase> TestDatabase::Make(const std::string& kind) {
  if (kind == "sqlite") return std::make_unique<SqliteTestDatabase>();
  REEL_CHECK(kind == "postgres") << "unknown test database kind " << kind;
  const char* server = std::getenv("REEL_TEST_POSTGRES");
  if (server == nullptr) return nullptr;
  return std::make_unique<PostgresTestDatabase>(server);
}

}  // namespace reel::db::testing
