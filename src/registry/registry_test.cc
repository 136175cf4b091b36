// The registry on SQLite (always) and on a real PostgreSQL server (registry_postgres_test), with
// weights in memory; the multi-process test keeps them in a local folder.
#include "registry/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <memory>
#include <set>
#include <string>

#include "base/files.h"
#include "db/database.h"
#include "db/testing/test_database.h"
#include "registry/registry_impl.h"
#include "registry/registry_test_util.h"
#include "storage/local_store.h"
#include "testing/processes.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::registry {
namespace {

NewVersion Version(const std::string& model, uint64_t seed) {
  NewVersion v;
  v.model = model;
  v.weights = Model(seed);
  v.architecture = {{"name", "r2plus1d"}, {"num_classes", 8}};
  v.config = "optimizer:\n  lr: 0.002\n";
  v.metrics = {{"top1", 0.9}};
  v.dataset_uri = "reel-data/datasets/synthetic";
  v.dataset_hash = "abc";
  v.code_commit = "1c2bccc";
  v.message = "seed " + std::to_string(seed);
  return v;
}

class RegistryTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    database_ = db::testing::TestDatabase::Make(GetParam());
    if (!database_) GTEST_SKIP() << "REEL_TEST_POSTGRES is not set (registry_postgres_test)";
    registry_ = OpenRegistry(chunks_);
  }

  std::unique_ptr<Registry> OpenRegistry(std::shared_ptr<storage::ObjectStore> chunks) {
    auto db = db::Open(database_->Uri());
    REEL_CHECK(db.ok()) << db.status().ToString();
    RegistryOptions options;
    options.weights.chunk_bytes = 10000;
    options.now_ms = [this] { return now_ms_ += 1000; };
    auto r = Registry::Open(std::move(db).value(), std::move(chunks), "", options);
    REEL_CHECK(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }

  Result<VersionInfo> Register(NewVersion v, const Actor& who = kAda) {
    return registry_->Register(v, who);
  }

  int64_t now_ms_ = 1764633600000;  // 2025-12-02T00:00:00Z
  std::shared_ptr<storage::MemoryStore> chunks_ = std::make_shared<storage::MemoryStore>();
  std::unique_ptr<db::testing::TestDatabase> database_;
  std::unique_ptr<Registry> registry_;
};

TEST_P(RegistryTest, ARegisteredVersionComesBackWhole) {
  NewVersion nv = Version("clf", 1);
  nv.tags = {{"team", "vision"}};
  ASSERT_OK_AND_ASSIGN(VersionInfo v, Register(nv));
  EXPECT_EQ(v.id.ToString(), "models:/clf/1");
  EXPECT_EQ(v.branch, "main");
  EXPECT_EQ(v.author, "ada");
  EXPECT_EQ(v.created_at, "2025-12-02T00:00:01.000Z");
  ASSERT_OK_AND_ASSIGN(VersionInfo got, registry_->Get("models:/clf/1"));
  EXPECT_EQ(got.architecture, nv.architecture);
  EXPECT_EQ(got.config, nv.config);
  EXPECT_EQ(got.metrics, nv.metrics);
  EXPECT_EQ(got.dataset_uri, nv.dataset_uri);
  EXPECT_EQ(got.code_commit, "1c2bccc");
  EXPECT_EQ(got.message, "seed 1");
  EXPECT_EQ(got.tags, nv.tags);
  EXPECT_EQ(got.weight_bytes, v.weight_bytes);
  EXPECT_GT(got.weight_bytes, 0u);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile weights, registry_->PullWeights(got));
  ExpectSameFile(weights, nv.weights);
  EXPECT_STATUS(registry_->PullOptimizer(got), StatusCode::kNotFound);
}

TEST_P(RegistryTest, UrisResolveVersionsAliasesAndBranches) {
  ASSERT_OK(Register(Version("clf", 1)));
  ASSERT_OK(Register(Version("clf", 2)));
  ASSERT_OK(registry_->SetAlias("clf", "production", 1, kAda));
  auto version_of = [&](const std::string& uri) -> int64_t {
    Result<VersionInfo> v = registry_->Get(uri);
    return v.ok() ? v->id.version : -1;
  };
  EXPECT_EQ(version_of("models:/clf/1"), 1);
  EXPECT_EQ(version_of("models:/clf@production"), 1);
  EXPECT_EQ(version_of("models:/clf/branch/main"), 2);
  EXPECT_EQ(version_of("models:/clf"), 2);
  EXPECT_STATUS(registry_->Get("models:/clf/3"), StatusCode::kNotFound);
  EXPECT_STATUS(registry_->Get("models:/clf@staging"), StatusCode::kNotFound);
  EXPECT_STATUS(registry_->Get("models:/nope/1"), StatusCode::kNotFound);
  EXPECT_STATUS(registry_->Get("models:/clf/0"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(registry_->Get("models:/../etc/1"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(registry_->Get("clf/1"), StatusCode::kInvalidArgument);
}

TEST_P(RegistryTest, ASecondVersionStoresItsChangesAsDeltas) {
  ASSERT_OK(Register(Version("clf", 1)));
  NewVersion next = Version("clf", 1);
  next.weights.tensors["conv.weight"] = Moved(next.weights.tensors["conv.weight"], 1e-3, 9);
  next.metrics = {{"top1", 0.5}, {"per_class", {0.25, 0.75}}, {"class_names", {"a", "b"}}};
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(VersionInfo v2, registry_->Register(next, kAda, &stats));
  EXPECT_EQ(stats.chunks_written, 3) << "only conv.weight's chunks changed";
  EXPECT_EQ(stats.deltas_written, 3) << "against the branch head";
  EXPECT_LT(v2.stored_bytes, v2.weight_bytes);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, registry_->PullWeights(v2));
  ExpectSameFile(back, next.weights);
  ASSERT_OK_AND_ASSIGN(auto versions, registry_->ListVersions("clf"));
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].id.version, 2);  // newest first
  EXPECT_NE(versions[0].weights_id, versions[1].weights_id);
  EXPECT_TRUE(versions[0].config.empty()) << "a listing leaves the config to Get";
  EXPECT_TRUE(versions[0].weights.tensors.empty()) << "and the manifests";
  EXPECT_EQ(versions[0].metrics.dump(), R"({"top1":0.5})") << "a report's scalars only";
  ASSERT_OK_AND_ASSIGN(VersionInfo got, registry_->Get(versions[0].id));
  EXPECT_EQ(got.metrics, next.metrics) << "Get has the whole report";
  EXPECT_EQ(got.config, next.config);
  EXPECT_EQ(versions[0].message, next.message);
}

TEST_P(RegistryTest, LineageIsRecordedAndAnUnknownParentRegistersNothing) {
  ASSERT_OK(Register(Version("base", 1)));
  NewVersion tune = Version("clf", 2);
  tune.parents = {{"base", 1}};
  ASSERT_OK_AND_ASSIGN(VersionInfo v, Register(tune));
  ASSERT_EQ(v.parents.size(), 1u);
  EXPECT_EQ(v.parents[0].ToString(), "models:/base/1");
  NewVersion orphan = Version("clf", 3);
  orphan.parents = {{"base", 7}};
  EXPECT_STATUS(Register(orphan), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(auto versions, registry_->ListVersions("clf"));
  EXPECT_EQ(versions.size(), 1u);
  ASSERT_EQ(versions[0].parents.size(), 1u);
}

TEST_P(RegistryTest, BadNamesAreRefusedAndCreateNothing) {
  for (const char* name : {"", "../x", "a/b", "-x", "a b", "x@y"}) {
    EXPECT_STATUS(Register(Version(name, 1)), StatusCode::kInvalidArgument) << name;
  }
  NewVersion bad_branch = Version("clf", 1);
  bad_branch.branch = "feature/x";
  EXPECT_STATUS(Register(bad_branch), StatusCode::kInvalidArgument);
  NewVersion empty = Version("clf", 1);
  empty.weights.tensors.clear();
  EXPECT_STATUS(Register(empty), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(auto models, registry_->ListModels());
  EXPECT_TRUE(models.empty());
  EXPECT_EQ(chunks_->request_count(), 0u) << "nothing was pushed";
}

TEST_P(RegistryTest, AliasesMoveWithAnAuditTrailAndProtectedOnesNeedAnAdmin) {
  ASSERT_OK(Register(Version("clf", 1)));
  ASSERT_OK(Register(Version("clf", 2)));
  ASSERT_OK(registry_->SetAlias("clf", "staging", 1, kAda));
  ASSERT_OK(registry_->SetAlias("clf", "staging", 2, kAda));
  EXPECT_STATUS(registry_->SetAlias("clf", "staging", 9, kAda), StatusCode::kNotFound);
  EXPECT_STATUS(registry_->SetAlias("clf", "production", 1, kAda, true),
                StatusCode::kPermissionDenied);
  ASSERT_OK(registry_->SetAlias("clf", "production", 1, kRoot, true));
  EXPECT_STATUS(registry_->SetAlias("clf", "production", 2, kAda), StatusCode::kPermissionDenied);
  EXPECT_STATUS(registry_->RemoveAlias("clf", "production", kAda), StatusCode::kPermissionDenied);
  ASSERT_OK(registry_->SetAlias("clf", "production", 2, kRoot));
  ASSERT_OK(registry_->RemoveAlias("clf", "staging", kAda));
  EXPECT_STATUS(registry_->RemoveAlias("clf", "staging", kAda), StatusCode::kNotFound);

  ASSERT_OK_AND_ASSIGN(auto aliases, registry_->ListAliases("clf"));
  ASSERT_EQ(aliases.size(), 1u);
  EXPECT_EQ(aliases[0].name, "production");
  EXPECT_EQ(aliases[0].version, 2);
  EXPECT_TRUE(aliases[0].protected_);  // moving keeps the protection
  ASSERT_OK_AND_ASSIGN(auto history, registry_->AliasHistory("clf"));
  ASSERT_EQ(history.size(), 5u);  // newest first; refused moves left no trace
  EXPECT_EQ(history[0].alias, "staging");
  EXPECT_EQ(history[0].from, 2);
  EXPECT_FALSE(history[0].to.has_value());
  EXPECT_EQ(history[1].by, "root");
  EXPECT_EQ(history[1].from, 1);
  EXPECT_EQ(history[1].to, 2);
  EXPECT_FALSE(history[4].from.has_value());
  EXPECT_EQ(history[4].to, 1);
}

TEST_P(RegistryTest, BranchesAreHeadsWithAHistory) {
  ASSERT_OK(Register(Version("clf", 1)));
  ASSERT_OK(registry_->CreateBranch("clf", "experiment-x", 1, kAda));
  EXPECT_STATUS(registry_->CreateBranch("clf", "experiment-x", 1, kAda),
                StatusCode::kAlreadyExists);
  EXPECT_STATUS(registry_->CreateBranch("clf", "other", 5, kAda), StatusCode::kNotFound);
  NewVersion on_branch = Version("clf", 2);
  on_branch.branch = "experiment-x";
  ASSERT_OK(Register(on_branch));
  ASSERT_OK(Register(on_branch));
  ASSERT_OK_AND_ASSIGN(auto log, registry_->Log("clf", "experiment-x"));
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].version, 3);
  EXPECT_EQ(log[1].version, 2);
  EXPECT_EQ(log[2].version, 1);
  EXPECT_EQ(log[2].action, "create");
  EXPECT_EQ(log[0].action, "register");
  ASSERT_OK_AND_ASSIGN(auto main_log, registry_->Log("clf", "main"));
  EXPECT_EQ(main_log.size(), 1u);
  ASSERT_OK_AND_ASSIGN(auto branches, registry_->ListBranches("clf"));
  ASSERT_EQ(branches.size(), 2u);
  EXPECT_EQ(branches[0].name, "experiment-x");
  EXPECT_EQ(branches[0].head, 3);
  EXPECT_STATUS(registry_->DeleteBranch("clf", "main", kAda), StatusCode::kFailedPrecondition);
  ASSERT_OK(registry_->DeleteBranch("clf", "experiment-x", kAda));
  EXPECT_STATUS(registry_->Log("clf", "experiment-x"), StatusCode::kNotFound);
  ASSERT_OK(registry_->Get("models:/clf/3"));  // versions outlive their branch
}

TEST_P(RegistryTest, RemovalRefusesWhatIsReferencedUnlessForced) {
  ASSERT_OK(Register(Version("clf", 1)));
  NewVersion child = Version("clf", 2);
  child.parents = {{"clf", 1}};
  ASSERT_OK(Register(child));
  ASSERT_OK(registry_->SetAlias("clf", "production", 2, kAda));
  Status refused = registry_->Remove({"clf", 2}, false, kAda);
  EXPECT_STATUS(refused, StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("alias production"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("head of branch main"), std::string::npos) << refused.message();
  Status parent = registry_->Remove({"clf", 1}, false, kAda);
  EXPECT_NE(parent.message().find("child models:/clf/2"), std::string::npos) << parent.message();

  ASSERT_OK(registry_->Remove({"clf", 2}, true, kAda));
  EXPECT_STATUS(registry_->Get("models:/clf/2"), StatusCode::kNotFound);
  EXPECT_STATUS(registry_->Get("models:/clf@production"), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(VersionInfo head, registry_->Get("models:/clf/branch/main"));
  EXPECT_EQ(head.id.version, 1) << "main stepped back";
  ASSERT_OK_AND_ASSIGN(VersionInfo v3, Register(Version("clf", 3)));
  EXPECT_EQ(v3.id.version, 3) << "numbers are never reused";
  ASSERT_OK_AND_ASSIGN(auto history, registry_->AliasHistory("clf"));
  EXPECT_FALSE(history[0].to.has_value()) << "the forced removal is in the audit trail";
}

TEST_P(RegistryTest, AnIdenticalRegistrationCanReuseTheHead) {
  NewVersion nv = Version("clf", 1);
  nv.reuse_identical_head = true;
  bool reused = true;
  ASSERT_OK_AND_ASSIGN(VersionInfo v1, registry_->Register(nv, kAda, nullptr, &reused));
  EXPECT_FALSE(reused);
  ASSERT_OK_AND_ASSIGN(VersionInfo again, registry_->Register(nv, kAda, nullptr, &reused));
  EXPECT_TRUE(reused);
  EXPECT_EQ(again.id.version, v1.id.version);
  nv.config += "seed: 2\n";  // a config that differs, with the same weights: nothing new
  ASSERT_OK_AND_ASSIGN(VersionInfo same, registry_->Register(nv, kAda, nullptr, &reused));
  EXPECT_TRUE(reused);
  nv.weights.tensors["fc.weight"] = Moved(nv.weights.tensors["fc.weight"], 1e-3, 3);
  ASSERT_OK_AND_ASSIGN(VersionInfo v2, registry_->Register(nv, kAda, nullptr, &reused));
  EXPECT_FALSE(reused);
  EXPECT_EQ(v2.id.version, 2);
  nv.reuse_identical_head = false;
  ASSERT_OK_AND_ASSIGN(VersionInfo v3, Register(nv));
  EXPECT_EQ(v3.id.version, 3) << "without the flag, every registration is a version";
}

TEST_P(RegistryTest, TagsAreSetReplacedAndRemoved) {
  ASSERT_OK(Register(Version("clf", 1)));
  ASSERT_OK(registry_->SetTag({"clf", 1}, "stage", "candidate"));
  ASSERT_OK(registry_->SetTag({"clf", 1}, "stage", "approved"));
  EXPECT_STATUS(registry_->SetTag({"clf", 1}, "bad key", "x"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(registry_->SetTag({"clf", 4}, "stage", "x"), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(VersionInfo v, registry_->Get("models:/clf/1"));
  EXPECT_EQ(v.tags.at("stage"), "approved");
  ASSERT_OK(registry_->RemoveTag({"clf", 1}, "stage"));
  EXPECT_STATUS(registry_->RemoveTag({"clf", 1}, "stage"), StatusCode::kNotFound);
}

TEST_P(RegistryTest, AnInterruptedPushLeavesNoVersionAndTheRerunReusesItsChunks) {
  auto flaky = std::make_shared<StopsAfterPuts>(4);
  std::unique_ptr<Registry> registry = OpenRegistry(flaky);
  EXPECT_STATUS(registry->Register(Version("clf", 1), kAda), StatusCode::kUnavailable);
  EXPECT_STATUS(registry->Get("models:/clf"), StatusCode::kNotFound);
  flaky->allowed_ = 1000;
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(VersionInfo v, registry->Register(Version("clf", 1), kAda, &stats));
  EXPECT_EQ(v.id.version, 1);
  EXPECT_EQ(stats.chunks_written, 2) << "4 of the 6 chunks were already stored";
}

TEST_P(RegistryTest, ModelsAreListedWithTheirCounts) {
  ASSERT_OK(Register(Version("b", 1)));
  ASSERT_OK(Register(Version("a", 1)));
  ASSERT_OK(Register(Version("a", 2)));
  ASSERT_OK_AND_ASSIGN(auto models, registry_->ListModels());
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].name, "a");
  EXPECT_EQ(models[0].versions, 2);
  EXPECT_EQ(models[0].latest, 2);
  EXPECT_EQ(models[1].created_by, "ada");
}

// Several processes register into one registry at once: every version lands with its own number
// and the branch history has them all.
TEST_P(RegistryTest, ConcurrentRegistrationsFromSeveralProcesses) {
  reel::testing::TempDir weights;
  const std::string uri = database_->Uri(), dir = weights.path();
  constexpr int kProcs = 3, kEach = 3;
  const int failed = reel::testing::FailedChildren(kProcs, [&](int p) {
    auto db = db::Open(uri);
    auto store = storage::LocalStore::Open(dir);
    if (!db.ok() || !store.ok()) return 10;
    auto registry = Registry::Open(std::move(db).value(), std::move(store).value(), "");
    if (!registry.ok()) return 11;
    for (int i = 0; i < kEach; ++i) {
      Result<VersionInfo> v = (*registry)->Register(Version("clf", 10 * p + i), kAda);
      if (!v.ok()) {
        std::fprintf(stderr, "child %d: %s\n", p, v.status().ToString().c_str());
        return 12;
      }
    }
    return 0;
  });
  EXPECT_EQ(failed, 0);
  ASSERT_OK_AND_ASSIGN(auto versions, registry_->ListVersions("clf"));
  std::set<std::string> messages;
  for (const VersionInfo& v : versions) messages.insert(v.message);
  EXPECT_EQ(versions.size(), size_t{kProcs * kEach});
  EXPECT_EQ(messages.size(), size_t{kProcs * kEach});
  EXPECT_EQ(versions.front().id.version, kProcs * kEach);
  ASSERT_OK_AND_ASSIGN(auto log, registry_->Log("clf", "main"));
  EXPECT_EQ(log.size(), size_t{kProcs * kEach});
}

// A registry written before schema step 3 kept a version's config and manifests in its row;
// opened by this build, they move beside it and read back whole.
TEST(RegistrySchema, StepThreeMovesTheDocumentsOutOfTheVersionRows) {
  reel::testing::TempDir dir;
  const NewVersion nv = Version("clf", 4);
  constexpr char kReport[] = R"({"per_class":[1.0,0.5],"top1":0.75})";
  std::string manifest;
  {
    ASSERT_OK_AND_ASSIGN(auto db, db::OpenSqlite(dir.path() + "/registry.db"));
    const std::vector<db::Migration> before(RegistryMigrations().begin(),
                                            RegistryMigrations().begin() + 2);
    ASSERT_OK(db::Migrate(*db, "registry", before));
    ASSERT_OK_AND_ASSIGN(auto store, storage::LocalStore::Open(dir.path()));
    WeightStore weights(std::move(store), "weights/");
    ASSERT_OK_AND_ASSIGN(WeightManifest m, weights.Push(nv.weights, nullptr));
    manifest = ManifestToJson(m);
    ASSERT_OK(db->Exec("INSERT INTO registry_models (name, next_version, created_at, created_by) "
                       "VALUES ('clf', 2, 't', 'ada')")
                  .status());
    ASSERT_OK(db->Exec("INSERT INTO registry_versions (model, version, branch, architecture, "
                       "config, metrics, recipe, dataset_uri, dataset_hash, code_commit, "
                       "code_dirty, author, created_at, message, weight_bytes, stored_bytes, "
                       "weights_id, weights, optimizer) VALUES ('clf', 1, 'main', '{}', ?, ?, "
                       "'{}', '', '', '', 0, 'ada', 't', 'old', 0, 0, 'id', ?, NULL)",
                       {nv.config, std::string(kReport), manifest})
                  .status());
  }
  ASSERT_OK_AND_ASSIGN(auto registry, Registry::Open(dir.path()));
  ASSERT_OK_AND_ASSIGN(VersionInfo v, registry->Get("models:/clf/1"));
  EXPECT_EQ(v.config, nv.config);
  EXPECT_EQ(v.metrics.dump(), kReport);
  EXPECT_EQ(ManifestToJson(v.weights), manifest);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, registry->PullWeights(v));
  ExpectSameFile(back, nv.weights);
  ASSERT_OK_AND_ASSIGN(auto listed, registry->ListVersions("clf"));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].message, "old");
  EXPECT_EQ(listed[0].metrics.dump(), R"({"top1":0.75})") << "a listing's metrics are scalars";
  GcOptions gc;
  gc.grace_ms = 0;
  ASSERT_OK_AND_ASSIGN(GcStats stats, registry->CollectGarbage(gc, kRoot));
  EXPECT_EQ(stats.chunks_removed, 0) << "the moved manifest still marks its chunks";
  EXPECT_GT(stats.chunks_live, 0);
}

// A folder registry keeps its last pushes' chunks in cache/bases when it closes, so that the next
// process's push takes its delta bases (and the base's base, for a linear delta) from there
// instead of decoding their chains; a damaged file there is a miss, never a wrong base.
TEST(RegistryFolderCache, TheNextProcessTakesItsBasesFromTheFolder) {
  reel::testing::TempDir dir;
  NewVersion v = Version("clf", 1);
  {
    ASSERT_OK_AND_ASSIGN(auto first, OpenLocalRegistry(dir.path(), "", {}));
    ASSERT_OK(first->Register(v, kAda, nullptr, nullptr).status());
    v.weights.tensors["conv.weight"] = Moved(v.weights.tensors["conv.weight"], 1e-3, 2);
    ASSERT_OK(first->Register(v, kAda, nullptr, nullptr).status());
  }
  const std::string bases = dir.Join("cache/bases");
  ASSERT_TRUE(std::filesystem::is_directory(bases));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(bases), {}), 5)
      << "version 1's four chunks and version 2's changed one";
  const models::TensorBytes previous = v.weights.tensors["conv.weight"];
  v.weights.tensors["conv.weight"] = Moved(previous, 1e-3, 3);
  ASSERT_OK_AND_ASSIGN(auto next, OpenLocalRegistry(dir.path(), "", {}));
  ASSERT_OK_AND_ASSIGN(VersionInfo third, next->Register(v, kAda, nullptr, nullptr));
  EXPECT_EQ(next->weight_store().base_cache().size(), 6u)
      << "version 3's four chunks and the two bases read from the folder";
  ASSERT_OK_AND_ASSIGN(models::SafetensorsFile back, next->PullWeights(third));
  ExpectSameFile(back, v.weights);

  // The same push from a folder whose files are damaged: decoded from the store instead.
  for (const auto& e : std::filesystem::directory_iterator(bases)) {
    ASSERT_OK(WriteFileAtomically(e.path().string(), "damaged"));
  }
  v.weights.tensors["conv.weight"] = Moved(v.weights.tensors["conv.weight"], 1e-3, 4);
  ASSERT_OK_AND_ASSIGN(auto damaged, OpenLocalRegistry(dir.path(), "", {}));
  ASSERT_OK_AND_ASSIGN(VersionInfo fourth, damaged->Register(v, kAda, nullptr, nullptr));
  EXPECT_EQ(damaged->weight_store().base_cache().size(), 4u) << "no base came from the folder";
  ASSERT_OK_AND_ASSIGN(back, damaged->PullWeights(fourth));
  ExpectSameFile(back, v.weights);
}

// A listing of thousands of versions builds them on several threads, in blocks of rows: every
// version lands in its place, newest first, with its own tags and parents.
TEST(RegistryListing, ThousandsOfVersionsListInOrderWithTheirTagsAndParents) {
  reel::testing::TempDir dir;
  constexpr int kVersions = 2500;
  {
    ASSERT_OK_AND_ASSIGN(auto db, db::OpenSqlite(dir.path() + "/registry.db"));
    ASSERT_OK(db::Migrate(*db, "registry", RegistryMigrations()));
    ASSERT_OK(db->Transact([&]() -> Status {
      REEL_RETURN_IF_ERROR(db->Exec("INSERT INTO registry_models (name, next_version, "
                                    "created_at, created_by) VALUES ('clf', ?, 't', 'ada')",
                                    {int64_t{kVersions + 1}})
                               .status());
      for (int64_t v = 1; v <= kVersions; ++v) {
        REEL_RETURN_IF_ERROR(
            db->Exec("INSERT INTO registry_versions (model, version, branch, architecture, "
                     "metrics, recipe, dataset_uri, dataset_hash, code_commit, code_dirty, "
                     "author, created_at, message, weight_bytes, stored_bytes, weights_id) "
                     "VALUES ('clf', ?, 'main', '{\"name\":\"r2plus1d\"}', ?, '{}', '', '', '', "
                     "0, 'ada', 't', ?, 4, 4, 'id')",
                     {v, "{\"top1\":" + std::to_string(v) + "}", "m" + std::to_string(v)})
                .status());
        REEL_RETURN_IF_ERROR(db->Exec("INSERT INTO registry_tags (model, version, tag, value) "
                                      "VALUES ('clf', ?, 'step', ?)",
                                      {v, std::to_string(10 * v)})
                                 .status());
        if (v == 1) continue;
        REEL_RETURN_IF_ERROR(db->Exec("INSERT INTO registry_parents (model, version, position, "
                                      "parent_model, parent_version) VALUES ('clf', ?, 0, "
                                      "'clf', ?)",
                                      {v, v - 1})
                                 .status());
      }
      return Status::Ok();
    }));
  }
  ASSERT_OK_AND_ASSIGN(auto registry, Registry::Open(dir.path()));
  ASSERT_OK_AND_ASSIGN(auto listed, registry->ListVersions("clf"));
  ASSERT_EQ(listed.size(), size_t{kVersions});
  for (int64_t i = 0; i < kVersions; ++i) {
    const VersionInfo& v = listed[static_cast<size_t>(i)];
    const int64_t n = kVersions - i;
    ASSERT_EQ(v.id.version, n);
    EXPECT_EQ(v.message, "m" + std::to_string(n));
    EXPECT_EQ(v.metrics["top1"], n);
    EXPECT_EQ(v.architecture["name"], "r2plus1d");
    EXPECT_EQ(v.tags.at("step"), std::to_string(10 * n));
    ASSERT_EQ(v.parents.size(), n == 1 ? 0u : 1u);
    if (n > 1) {
      EXPECT_EQ(v.parents[0].version, n - 1);
    }
  }
}

// Versions whose rows hold `metrics` texts, numbered from 1, in a new SQLite registry at `dir`.
void InsertVersionRows(const std::string& dir, const std::vector<std::string>& metrics) {
  ASSERT_OK_AND_ASSIGN(auto db, db::OpenSqlite(dir + "/registry.db"));
  ASSERT_OK(db::Migrate(*db, "registry", RegistryMigrations()));
  ASSERT_OK(db->Exec("INSERT INTO registry_models (name, next_version, created_at, created_by) "
                     "VALUES ('clf', ?, 't', 'ada')",
                     {static_cast<int64_t>(metrics.size() + 1)})
                .status());
  for (size_t i = 0; i < metrics.size(); ++i) {
    ASSERT_OK(db->Exec("INSERT INTO registry_versions (model, version, branch, architecture, "
                       "metrics, recipe, dataset_uri, dataset_hash, code_commit, code_dirty, "
                       "author, created_at, message, weight_bytes, stored_bytes, weights_id) "
                       "VALUES ('clf', ?, 'main', '{}', ?, '{}', '', '', '', 0, 'ada', 't', '', "
                       "4, 4, 'id')",
                       {static_cast<int64_t>(i + 1), metrics[i]})
                  .status());
  }
}

// A listing reads each row's metrics with its own parser (for speed); what it returns must be
// what nlohmann's parser makes of the same text, cut to its scalar entries: the same values and
// the same number types.
TEST(RegistryListing, MetricsOfEveryKindReadAsTheirJsonSays) {
  const std::vector<std::string> texts = {
      R"({"top1":0.5,"top5":1.0,"clips":266,"loss":-2.5e-3,"big":1E10,"tiny":5e-324})",
      R"({"zero":0,"negative":-5,"max":18446744073709551615,"min":-9223372036854775808})",
      R"({"huge":123456789012345678901234567890,"x":1})",
      R"( { "name" : "a\"b\\c\u00e9\n" , "ok" : true , "bad" : false , "none" : null } )",
      R"({"top1":0.75,"per_class":[1.0,0.5],"confusion":{"a":[1]},"names":["a"]})",
      R"({"same":1,"same":2})",
      R"({})"};
  reel::testing::TempDir dir;
  InsertVersionRows(dir.path(), texts);
  ASSERT_OK_AND_ASSIGN(auto registry, Registry::Open(dir.path()));
  ASSERT_OK_AND_ASSIGN(auto listed, registry->ListVersions("clf"));
  ASSERT_EQ(listed.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    nlohmann::json want = nlohmann::json::parse(texts[i]);
    for (auto it = want.begin(); it != want.end();) {
      it = it->is_primitive() && !it->is_null() ? std::next(it) : want.erase(it);
    }
    const nlohmann::json& got = listed[texts.size() - 1 - i].metrics;
    EXPECT_EQ(got.dump(), want.dump()) << texts[i];
    ASSERT_EQ(got.size(), want.size()) << texts[i];
    for (const auto& [key, value] : want.items()) {
      EXPECT_EQ(got.at(key).type(), value.type()) << texts[i] << " " << key;
    }
  }
}

TEST(RegistryListing, AMalformedMetricsRowIsDataLossNamingIt) {
  for (const std::string bad : {R"({"top1":0.5)", R"({"top1":0.5} x)", R"({"top1":.5})",
                                R"({"top1":tru})", "{\"a\":\"\xff\"}"}) {
    reel::testing::TempDir dir;
    InsertVersionRows(dir.path(), {R"({"top1":0.5})", bad});
    ASSERT_OK_AND_ASSIGN(auto registry, Registry::Open(dir.path()));
    const auto listed = registry->ListVersions("clf");
    EXPECT_STATUS(listed, StatusCode::kDataLoss) << bad;
    EXPECT_NE(listed.status().ToString().find("models:/clf/2 metrics"), std::string::npos)
        << listed.status().ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Sqlite, RegistryTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, RegistryTest, ::testing::Values("postgres"));

TEST(ModelUri, ParsesEveryFormAndPrintsItBack) {
  for (const char* uri : {"models:/clf/3", "models:/clf@production", "models:/clf/branch/exp-1"}) {
    ASSERT_OK_AND_ASSIGN(ModelRef ref, ParseModelUri(uri));
    EXPECT_EQ(ref.ToString(), uri);
  }
  ASSERT_OK_AND_ASSIGN(ModelRef bare, ParseModelUri("models:/clf"));
  EXPECT_EQ(bare.ToString(), "models:/clf/branch/main");
  for (const char* bad : {"models:/", "models:/clf/", "models:/clf/x", "models:/clf@",
                          "models:/clf/branch/", "models:/a/b/c", "s3://b/k"}) {
    EXPECT_STATUS(ParseModelUri(bad), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace reel::registry
