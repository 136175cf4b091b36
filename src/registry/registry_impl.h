// Inside the registry (registry*.cc only): the state a Registry holds and the helpers its files
// share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "db/database.h"
#include "registry/registry.h"
#include "registry/weight_store.h"

namespace reel::registry {

// The schema's history (registry_schema.cc); each entry is one released step.
const std::vector<db::Migration>& RegistryMigrations();

class Registry::Impl {
 public:
  Impl(std::unique_ptr<db::Database> db, WeightStore weights, RegistryOptions options)
      : db_(std::move(db)), weights_(std::move(weights)), options_(std::move(options)) {}

  db::Database& db() { return *db_; }
  const WeightStore& weights() const { return weights_; }
  std::string Now() const;  // RFC 3339, UTC, milliseconds

  // NotFound unless the model / version / branch exists.
  Status RequireModel(const std::string& model);
  Status RequireVersion(const VersionId& id);
  Result<int64_t> BranchHead(const std::string& model, const std::string& branch);

  // One version's row, tags and parents; its manifests too when `manifests`.
  Result<VersionInfo> LoadVersion(const VersionId& id, bool manifests);
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
