// Inside the registry (the files of src/registry only): the state a Registry holds and the
// helpers its files share.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "registry/registry.h"
#include "registry/weight_store.h"

namespace reel::registry {

class LocalRegistry;

// The schema's history (registry_schema.cc); each entry is one released step.
const std::vector<db::Migration>& RegistryMigrations();

// The database of the registry at `uri` (a folder: its registry.db, created when missing; or
// postgresql://...), its schema brought up to date.
Result<std::unique_ptr<db::Database>> OpenRegistryDatabase(const std::string& uri);

// The embedded registry at `uri`: a folder, or postgresql://... with its weights in `chunks` (a
// store URI). Errors: InvalidArgument for a PostgreSQL registry without `chunks`; the
// database's or store's.
Result<std::unique_ptr<LocalRegistry>> OpenLocalRegistry(const std::string& uri,
                                                         const std::string& chunks,
                                                         RegistryOptions options = {});

// What a push produced, before its version is committed.
struct PushedWeights {
  WeightManifest weights;
  std::optional<WeightManifest> optimizer;
  PushStats stats;
};

// The garbage collector's state as a push saw it before it began (registry_gc.cc).
struct GcTicket {
  int64_t generation = 0;
};

// The embedded registry: metadata in a db::Database, weights in a WeightStore.
class LocalRegistry final : public Registry {
 public:
  class Impl;
  explicit LocalRegistry(std::unique_ptr<Impl> impl);
  ~LocalRegistry() override;

  using Registry::Get;
  Result<VersionInfo> Register(const NewVersion& version, const Actor& who, PushStats* stats,
                               bool* reused) override;
  Result<VersionInfo> Get(const VersionId& id) override;
  Result<VersionId> Resolve(const ModelRef& ref) override;
  Result<std::vector<VersionId>> Parents(const VersionId& id) override;
  Result<std::vector<ModelSummary>> ListModels() override;
  Result<std::vector<VersionInfo>> ListVersions(const std::string& model) override;
  Result<std::vector<BranchInfo>> ListBranches(const std::string& model) override;
  Status CreateBranch(const std::string& model, const std::string& branch, int64_t from,
                      const Actor& who) override;
  Status DeleteBranch(const std::string& model, const std::string& branch,
                      const Actor& who) override;
  Result<std::vector<BranchEvent>> Log(const std::string& model,
                                       const std::string& branch) override;
  Result<std::vector<AliasInfo>> ListAliases(const std::string& model) override;
  Status SetAlias(const std::string& model, const std::string& alias, int64_t version,
                  const Actor& who, std::optional<bool> protect) override;
  Status RemoveAlias(const std::string& model, const std::string& alias, const Actor& who) override;
  Result<std::vector<AliasEvent>> AliasHistory(const std::string& model) override;
  Status SetTag(const VersionId& id, const std::string& key, const std::string& value) override;
  Status RemoveTag(const VersionId& id, const std::string& key) override;
  Status Remove(const VersionId& id, bool force, const Actor& who) override;
  Result<GcStats> CollectGarbage(const GcOptions& options, const Actor& who) override;
  Result<models::SafetensorsFile> PullWeights(const VersionInfo& version) override;
  Result<models::SafetensorsFile> PullOptimizer(const VersionInfo& version) override;
  Status PullWeightsTo(const VersionInfo& version, storage::ObjectWriter& out) override;

  // The weights' store: the server (service.cc) answers which chunks it lacks and rebuilds an
  // upload that sent only those.
  const WeightStore& weight_store() const;

 private:
  std::unique_ptr<Impl> impl_;
};

class LocalRegistry::Impl {
 public:
  Impl(std::unique_ptr<db::Database> db, WeightStore weights, RegistryOptions options)
      : db_(std::move(db)), weights_(std::move(weights)), options_(std::move(options)) {}

  db::Database& db() { return *db_; }
  const WeightStore& weights() const { return weights_; }
  std::string Now() const;  // RFC 3339, UTC, milliseconds
  int64_t NowMs() const;    // Unix milliseconds (RegistryOptions::now_ms when set)

  // Registration's steps (registry.cc): the version a push deltas against, and the transaction
  // that adds the version unless a garbage collection ran during the push (*raced).
  Result<std::optional<VersionInfo>> DeltaBase(const NewVersion& nv);
  Result<int64_t> Commit(const NewVersion& nv, const Actor& who, const PushedWeights& pushed,
                         const GcTicket& ticket, bool* raced, bool* reused);
  // The collector's state before push `attempt` (1, 2, ...): waits while a collection holds its
  // lease; Unavailable after too many attempts. GcMovedSince runs inside the commit's
  // transaction: true when a collection began or ended since the ticket, or holds its lease.
  Result<GcTicket> GcTicketForPush(int attempt);
  Result<bool> GcMovedSince(const GcTicket& ticket);

  // NotFound unless the model / version / branch exists.
  Status RequireModel(const std::string& model);
  Status RequireVersion(const VersionId& id);
  Result<int64_t> BranchHead(const std::string& model, const std::string& branch);

  // One version's row, tags and parents; its manifests too when `manifests`.
  Result<VersionInfo> LoadVersion(const VersionId& id, bool documents);
  // Appends to a branch's history and moves its head (creating the branch when missing).
  Status MoveBranch(const std::string& model, const std::string& branch, int64_t version,
                    const std::string& action, const std::string& by);
  // Appends to a model's alias audit trail.
  Status LogAlias(const std::string& model, const std::string& alias, std::optional<int64_t> from,
                  std::optional<int64_t> to, const std::string& by);

 private:
  std::unique_ptr<db::Database> db_;
  WeightStore weights_;
  RegistryOptions options_;
};

}  // namespace reel::registry
