// The model registry: registered models hold immutable, numbered versions; branches are movable
// heads with a history; aliases are named pointers moved atomically with an audit trail.
//
// A version records its architecture, weights (a WeightManifest: weight_store.h), the training
// config, the evaluation report, the dataset, the code version, its parents (lineage: one for a
// fine-tune, several for a merge), author, time, message, tags and the recipe that made it.
// Metadata lives in a db::Database (SQLite embedded, or PostgreSQL), weights in an ObjectStore.
//
// A registration pushes the weights first and then adds the version in one transaction, so a
// process killed mid-push leaves no visible version (only chunks, which a rerun reuses). Version
// numbers are never reused, even after `Remove`.
//
// Who: every change names an Actor. Protected aliases are moved only by an admin; roles per
// model (reader, writer, admin) are the HTTP server's to check (an embedded registry is its
// owner's, who is admin).
//
// Errors: NotFound naming the model, version, branch or alias; InvalidArgument for bad names and
// requests; FailedPrecondition for a removal that something still references (unless forced);
// PermissionDenied for a protected alias moved by a non-admin; the database's and store's errors.
// Thread-safety: a Registry holds one database connection: use it from one thread at a time
// (several processes may share one registry).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "db/database.h"
#include "models/safetensors.h"
#include "registry/model_uri.h"
#include "registry/weight_store.h"
#include "storage/object_store.h"

namespace reel::registry {

struct VersionId {
  std::string model;
  int64_t version = 0;
  std::string ToString() const { return VersionUri(model, version); }
  bool operator==(const VersionId& o) const { return model == o.model && version == o.version; }
};

struct Actor {
  std::string name;
  bool admin = false;
  // $REEL_USER, else $USER, else "unknown"; admin: an embedded registry is its owner's.
  static Actor Local();
};

// What a registration supplies.
struct NewVersion {
  std::string model;
  std::string branch = "main";  // created when missing; its head moves to the new version
  models::SafetensorsFile weights;
  std::optional<models::SafetensorsFile> optimizer;        // optimiser state, when kept
  nlohmann::json architecture = nlohmann::json::object();  // the config's model section
  std::string config;  // the whole training config (YAML), "" when none
  nlohmann::json metrics = nlohmann::json::object();  // the evaluation report
  std::string dataset_uri, dataset_hash;
  std::string code_commit;  // Reel's git commit; "" when unknown
  bool code_dirty = false;
  std::vector<VersionId> parents;  // lineage
  std::string message;
  std::map<std::string, std::string> tags;
  nlohmann::json recipe = nlohmann::json::object();  // how it was made, e.g. {"op": "register"}
  // When the branch head already holds these weights (bit for bit), return it instead of adding
  // a version: as git refuses an empty commit, a rerun of a finished job adds nothing.
  bool reuse_identical_head = false;
};

struct VersionInfo {
  VersionId id;
  std::string branch;  // the branch it was registered on
  nlohmann::json architecture, recipe;
  nlohmann::json metrics;  // the evaluation report; a listing's: its scalar entries (top1, ...)
  std::string dataset_uri, dataset_hash, code_commit;
  bool code_dirty = false;
  std::vector<VersionId> parents;
  std::string author, created_at, message;  // created_at: RFC 3339, UTC
  std::map<std::string, std::string> tags;
  uint64_t weight_bytes = 0;  // the tensors' raw bytes
  uint64_t stored_bytes = 0;  // what this version's push added to the store
  std::string weights_id;     // equal for two versions with bit-identical weights
  // Filled by Get, not by listings:
  std::string config;  // the whole training config (YAML)
  WeightManifest weights;
  std::optional<WeightManifest> optimizer;
};

struct ModelSummary {
  std::string name, created_at, created_by;
  int64_t versions = 0, latest = 0;  // latest: the highest live version (0: none)
};

struct BranchInfo {
  std::string name;
  int64_t head = 0;
  std::string updated_at;
};

// One move of a branch head, newest first in Log.
struct BranchEvent {
  int64_t seq = 0;
  int64_t version = 0;  // the head after the move
  std::string action;   // "register", "create", "merge", "rebase"
  std::string by, at;
};

struct AliasInfo {
  std::string name;
  int64_t version = 0;
  bool protected_ = false;
  std::string updated_by, updated_at;
};

struct AliasEvent {
  int64_t seq = 0;
  std::string alias;
  std::optional<int64_t> from, to;  // nullopt: did not exist / removed
  std::string by, at;
};

struct RegistryOptions {
  WeightStoreOptions weights;
  std::function<int64_t()> now_ms;  // wall clock in Unix ms; the system clock when empty
};

// What the mark-and-sweep collector did (CollectGarbage).
struct GcStats {
  int64_t chunks_live = 0;     // chunks some version needs, its delta bases included
  int64_t chunks_removed = 0;  // unreferenced chunks old enough to remove
  int64_t chunks_young = 0;    // unreferenced but newer than the grace period: kept
  uint64_t bytes_removed = 0;
  int64_t chunks_missing = 0;  // named by a version but not in the store: that version is damaged
};

struct GcOptions {
  // An unreferenced chunk younger than this may belong to a push still running (its version is
  // added only after all its chunks are stored), so it is kept until a later collection.
  int64_t grace_ms = 3600 * 1000;
  bool dry_run = false;  // count, remove nothing
};

// The registry's contract. Two implementations: the embedded one (Open: a folder with SQLite, or
// a database and a store) and a client of `reel registry serve` (OpenRegistry with http://...).
class Registry {
 public:
  // `location`: a folder (SQLite registry.db and the weights inside it; created when missing).
  static Result<std::unique_ptr<Registry>> Open(const std::string& location,
                                                RegistryOptions options = {});
  // Metadata in `db_uri` (db::Open), weights under `prefix` of `chunks`.
  static Result<std::unique_ptr<Registry>> Open(std::unique_ptr<db::Database> db,
                                                std::shared_ptr<storage::ObjectStore> chunks,
                                                std::string prefix, RegistryOptions options = {});

  virtual ~Registry() = default;

  // Pushes the weights (deltas against the first parent, else the branch head) and adds the
  // version. The model is created by its first registration.
  // *reused: whether reuse_identical_head returned the head instead of a new version.
  virtual Result<VersionInfo> Register(const NewVersion& version, const Actor& who,
                                       PushStats* stats = nullptr, bool* reused = nullptr) = 0;

  // A version by URI (models:/...) or id, with its manifests.
  Result<VersionInfo> Get(const std::string& uri);
  virtual Result<VersionInfo> Get(const VersionId& id) = 0;
  virtual Result<VersionId> Resolve(const ModelRef& ref) = 0;
  // A version's parents, in order (lineage), without loading the version.
  virtual Result<std::vector<VersionId>> Parents(const VersionId& id) = 0;

  virtual Result<std::vector<ModelSummary>> ListModels() = 0;
  // Versions of `model`, newest first, without their config and manifests, with the scalar
  // entries of their evaluation reports only.
  virtual Result<std::vector<VersionInfo>> ListVersions(const std::string& model) = 0;

  virtual Result<std::vector<BranchInfo>> ListBranches(const std::string& model) = 0;
  virtual Status CreateBranch(const std::string& model, const std::string& branch, int64_t from,
                              const Actor& who) = 0;
  virtual Status DeleteBranch(const std::string& model, const std::string& branch,
                              const Actor& who) = 0;
  virtual Result<std::vector<BranchEvent>> Log(const std::string& model,
                                               const std::string& branch) = 0;

  virtual Result<std::vector<AliasInfo>> ListAliases(const std::string& model) = 0;
  // `protect`: change the alias's protection too (admin only); nullopt keeps it as it is.
  virtual Status SetAlias(const std::string& model, const std::string& alias, int64_t version,
                          const Actor& who, std::optional<bool> protect = std::nullopt) = 0;
  virtual Status RemoveAlias(const std::string& model, const std::string& alias,
                             const Actor& who) = 0;
  virtual Result<std::vector<AliasEvent>> AliasHistory(const std::string& model) = 0;

  virtual Status SetTag(const VersionId& id, const std::string& key, const std::string& value) = 0;
  virtual Status RemoveTag(const VersionId& id, const std::string& key) = 0;

  // Refuses (FailedPrecondition, naming them) a version that aliases, branch heads or child
  // versions refer to, unless `force`: then its aliases go, branch heads step back to their
  // previous live version, and children keep the parent's id in their lineage.
  // Its chunks stay until CollectGarbage.
  virtual Status Remove(const VersionId& id, bool force, const Actor& who) = 0;

  // Mark and sweep: removes the chunks no version needs (directly or as a delta base), except
  // those younger than options.grace_ms. Admin only. Safe while other processes push: a push
  // writes its chunks before its version, and a chunk it reuses is refreshed (see
  // weight_store.h), so a chunk in use is either referenced or young.
  virtual Result<GcStats> CollectGarbage(const GcOptions& options, const Actor& who) = 0;

  // The version's weights, bit-exact and verified.
  virtual Result<models::SafetensorsFile> PullWeights(const VersionInfo& version) = 0;
  virtual Result<models::SafetensorsFile> PullOptimizer(const VersionInfo& version) = 0;
  // The same written to `out` as a safetensors file (WriteSafetensors' bytes); `out` is not
  // closed, and on an error holds a part. The embedded registry writes while it decodes.
  virtual Status PullWeightsTo(const VersionInfo& version, storage::ObjectWriter& out);
};

}  // namespace reel::registry
