// Opening a registry, registering versions and reading them back. Branches, aliases, tags and
// removal are in registry_refs.cc.
#include "registry/registry.h"

#include <pwd.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "base/clock.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/logging.h"
#include "base/sync_point.h"
#include "base/thread_pool.h"
#include "registry/registry_impl.h"
#include "storage/local_store.h"
#include "storage/open.h"

namespace reel::registry {
namespace {

constexpr char kVersionColumns[] =
    "model, version, branch, architecture, metrics, recipe, dataset_uri, dataset_hash, "
    "code_commit, code_dirty, author, created_at, message, weight_bytes, stored_bytes, "
    "weights_id";

// A JSON column of `id`'s row. Listing thousands of versions parses three per row, so the
// common cases cost no parse (an empty object) or one per listing (`cache`: the architecture
// every version of a model shares, the few recipes), and the error's text is built only on an
// error.
Result<nlohmann::json> StoredJson(const std::string& text, const VersionId& id, const char* field,
                                  std::map<std::string, nlohmann::json>* cache = nullptr) {
  if (text == "{}") return nlohmann::json::object();
  if (cache != nullptr) {
    if (auto it = cache->find(text); it != cache->end()) return it->second;
  }
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return ParseJson(text, id.ToString() + " " + field);  // DataLoss naming the row and field
  }
  if (cache != nullptr) cache->emplace(text, doc);
  return doc;
}

// The scalar entries of an evaluation report (top1, top5, ...): what a version's row and a
// listing carry; the whole report (per class, confusion matrix) waits for Get.
nlohmann::json ScalarMetrics(nlohmann::json report) {
  for (auto it = report.begin(); it != report.end();) {
    it = it->is_primitive() && !it->is_null() ? std::next(it) : report.erase(it);
  }
  return report;
}

// A flat JSON object's entries into `out`, read with simdjson: nlohmann's parser took a third of
// a 10,000-version listing. False for anything else (nested values: rows from before schema step
// 3; malformed text), which the caller parses the slow way, so results and errors are the same.
// Numbers become what nlohmann's parser makes of them: unsigned, signed or double; nulls are
// dropped as ScalarMetrics drops them.
bool ParseFlatObject(std::string& text, nlohmann::json* out) {
  namespace od = simdjson::ondemand;
  const size_t size = text.size();
  text.reserve(size + simdjson::SIMDJSON_PADDING);
  thread_local od::parser parser;
  od::document doc;
  od::object object;
  if (parser.iterate(text.data(), size, text.capacity()).get(doc) || doc.get_object().get(object)) {
    return false;
  }
  *out = nlohmann::json::object();
  for (auto field : object) {
    std::string_view key;
    od::json_type type{};
    if (field.unescaped_key().get(key) || field.value().type().get(type)) return false;
    if (type == od::json_type::null) {
      bool null = false;
      if (field.value().is_null().get(null) || !null) return false;
      out->erase(std::string(key));  // a later null replaces an earlier value, as in nlohmann
      continue;
    }
    nlohmann::json& slot = (*out)[std::string(key)];
    if (type == od::json_type::number) {
      od::number n;
      if (field.value().get_number().get(n)) return false;
      if (n.is_int64()) {
        slot = n.get_int64() >= 0 ? nlohmann::json(static_cast<uint64_t>(n.get_int64()))
                                  : nlohmann::json(n.get_int64());
      } else {
        slot = n.is_uint64() ? nlohmann::json(n.get_uint64()) : nlohmann::json(n.get_double());
      }
    } else if (type == od::json_type::string) {
      std::string_view value;
      if (field.value().get_string().get(value)) return false;
      slot = std::string(value);
    } else if (type == od::json_type::boolean) {
      bool value = false;
      if (field.value().get_bool().get(value)) return false;
      slot = value;
    } else {
      return false;
    }
  }
  const char* trailing = nullptr;  // past the end is an error here: nothing follows the object
  return doc.current_location().get(trailing) != simdjson::SUCCESS;
}

// Takes the kVersionColumns of `r` (leaving "" in their place).
Result<VersionInfo> VersionFromRow(db::Row& r,
                                   std::map<std::string, nlohmann::json>* cache = nullptr) {
  VersionInfo v;
  v.id = {r.TakeText(0), r.Int(1)};
  v.branch = r.TakeText(2);
  REEL_ASSIGN_OR_RETURN(v.architecture, StoredJson(r.TakeText(3), v.id, "architecture", cache));
  std::string metrics = r.TakeText(4);
  if (!ParseFlatObject(metrics, &v.metrics)) {
    REEL_ASSIGN_OR_RETURN(nlohmann::json report, StoredJson(metrics, v.id, "metrics"));
    v.metrics = ScalarMetrics(std::move(report));  // rows from before schema step 3: whole reports
  }
  REEL_ASSIGN_OR_RETURN(v.recipe, StoredJson(r.TakeText(5), v.id, "recipe", cache));
  v.dataset_uri = r.TakeText(6);
  v.dataset_hash = r.TakeText(7);
  v.code_commit = r.TakeText(8);
  v.code_dirty = r.Int(9) != 0;
  v.author = r.TakeText(10);
  v.created_at = r.TakeText(11);
  v.message = r.TakeText(12);
  v.weight_bytes = static_cast<uint64_t>(r.Int(13));
  v.stored_bytes = static_cast<uint64_t>(r.Int(14));
  v.weights_id = r.TakeText(15);
  return v;
}

// The versions of a listing's rows, built on a thread per core in blocks of 1,000 rows: building
// and parsing thousands of VersionInfos costs more than SQLite's reading their rows.
Result<std::vector<VersionInfo>> VersionsFromRows(std::vector<db::Row>& rows) {
  constexpr size_t kBlock = 1000;
  std::vector<VersionInfo> out(rows.size());
  const auto build = [&](size_t block) -> Status {
    std::map<std::string, nlohmann::json> cache;  // one per thread
    for (size_t i = block * kBlock; i < std::min(rows.size(), (block + 1) * kBlock); ++i) {
      REEL_ASSIGN_OR_RETURN(out[i], VersionFromRow(rows[i], &cache));
    }
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(ParallelFor(HardwareThreads(), (rows.size() + kBlock - 1) / kBlock, build));
  return out;
}

// Equal for bit-identical weights: the tensors' names and content identities.
std::string WeightsId(const WeightManifest& m) {
  std::string text;
  for (const auto& [name, t] : m.tensors) text += name + '\0' + t.id + '\0';
  return Sha256Hex(text);
}

Status CheckNewVersion(const NewVersion& v) {
  REEL_RETURN_IF_ERROR(CheckName(v.model, "model name"));
  REEL_RETURN_IF_ERROR(CheckName(v.branch, "branch"));
  for (const auto& [key, value] : v.tags) REEL_RETURN_IF_ERROR(CheckName(key, "tag"));
  for (const VersionId& p : v.parents) REEL_RETURN_IF_ERROR(CheckName(p.model, "model name"));
  if (v.weights.tensors.empty()) {
    return InvalidArgumentError("model '" + v.model + "': the weights hold no tensors");
  }
  if (!v.architecture.is_object() || !v.metrics.is_object() || !v.recipe.is_object()) {
    return InvalidArgumentError("architecture, metrics and recipe must be JSON objects");
  }
  return Status::Ok();
}

// The branch head's number when it holds the same weights as `nv`, else 0.
Result<int64_t> SameHead(db::Database& d, const NewVersion& nv, const std::string& weights_id) {
  REEL_ASSIGN_OR_RETURN(
      auto rows, d.Query("SELECT v.version FROM registry_branches b JOIN registry_versions v "
                         "ON v.model = b.model AND v.version = b.head WHERE b.model = ? AND "
                         "b.name = ? AND v.weights_id = ?",
                         {nv.model, nv.branch, weights_id}));
  return rows.empty() ? 0 : rows[0].Int(0);
}

}  // namespace

Actor Actor::Local() {
  const char* user = std::getenv("REEL_USER");
  if (user == nullptr || *user == '\0') user = std::getenv("USER");
  if (user == nullptr || *user == '\0') {
    const passwd* entry = ::getpwuid(::getuid());  // a shell without $USER (cron, containers)
    user = entry != nullptr ? entry->pw_name : nullptr;
  }
  return Actor{user != nullptr && *user != '\0' ? user : "unknown", true};
}

int64_t LocalRegistry::Impl::NowMs() const {
  return options_.now_ms ? options_.now_ms()
                         : std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
}

std::string LocalRegistry::Impl::Now() const {
  return FormatIso8601Utc(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(NowMs())));
}

Status LocalRegistry::Impl::RequireModel(const std::string& model) {
  REEL_RETURN_IF_ERROR(CheckName(model, "model name"));
  REEL_ASSIGN_OR_RETURN(auto rows,
                        db_->Query("SELECT 1 FROM registry_models WHERE name = ?", {model}));
  if (rows.empty()) return NotFoundError("no registered model '" + model + "'");
  return Status::Ok();
}

Status LocalRegistry::Impl::RequireVersion(const VersionId& id) {
  REEL_RETURN_IF_ERROR(RequireModel(id.model));
  REEL_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT 1 FROM registry_versions WHERE model = ? AND version = ?",
                            {id.model, id.version}));
  if (rows.empty())
    return NotFoundError("model '" + id.model + "' has no version " + std::to_string(id.version));
  return Status::Ok();
}

Result<int64_t> LocalRegistry::Impl::BranchHead(const std::string& model,
                                                const std::string& branch) {
  REEL_RETURN_IF_ERROR(CheckName(branch, "branch"));
  REEL_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT head FROM registry_branches WHERE model = ? AND name = ?",
                            {model, branch}));
  if (rows.empty()) return NotFoundError("model '" + model + "' has no branch '" + branch + "'");
  return rows[0].Int(0);
}

Result<VersionInfo> LocalRegistry::Impl::LoadVersion(const VersionId& id, bool documents) {
  REEL_RETURN_IF_ERROR(RequireVersion(id));
  REEL_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT " + std::string(kVersionColumns) +
                                                  " FROM registry_versions WHERE model = ? AND "
                                                  "version = ?",
                                              {id.model, id.version}));
  REEL_ASSIGN_OR_RETURN(VersionInfo v, VersionFromRow(rows.at(0)));
  REEL_ASSIGN_OR_RETURN(auto tags, db_->Query("SELECT tag, value FROM registry_tags WHERE model = "
                                              "? AND version = ? ORDER BY tag",
                                              {id.model, id.version}));
  for (const db::Row& t : tags) v.tags[t.Text(0)] = t.Text(1);
  REEL_ASSIGN_OR_RETURN(auto parents,
                        db_->Query("SELECT parent_model, parent_version FROM registry_parents "
                                   "WHERE model = ? AND version = ? ORDER BY position",
                                   {id.model, id.version}));
  for (const db::Row& p : parents) v.parents.push_back({p.Text(0), p.Int(1)});
  if (!documents) return v;
  REEL_ASSIGN_OR_RETURN(auto docs, db_->Query("SELECT config, metrics, weights, optimizer FROM "
                                              "registry_version_documents WHERE model = ? AND "
                                              "version = ?",
                                              {id.model, id.version}));
  if (docs.empty()) return DataLossError(id.ToString() + ": its config and manifests are missing");
  db::Row& d = docs[0];
  v.config = d.TakeText(0);
  REEL_ASSIGN_OR_RETURN(v.metrics, StoredJson(d.TakeText(1), id, "metrics"));
  REEL_ASSIGN_OR_RETURN(v.weights, ManifestFromJson(d.Text(2), id.ToString() + " weights"));
  if (!d.IsNull(3)) {
    REEL_ASSIGN_OR_RETURN(v.optimizer, ManifestFromJson(d.Text(3), id.ToString() + " optimizer"));
  }
  return v;
}

Status LocalRegistry::Impl::MoveBranch(const std::string& model, const std::string& branch,
                                       int64_t version, const std::string& action,
                                       const std::string& by) {
  const std::string at = Now();
  REEL_ASSIGN_OR_RETURN(
      int64_t changed,
      db_->Exec(
          "UPDATE registry_branches SET head = ?, updated_at = ? WHERE model = ? AND name = ?",
          {version, at, model, branch}));
  if (changed == 0) {
    REEL_RETURN_IF_ERROR(db_->Exec("INSERT INTO registry_branches (model, name, head, updated_at) "
                                   "VALUES (?, ?, ?, ?)",
                                   {model, branch, version, at})
                             .status());
  }
  REEL_ASSIGN_OR_RETURN(auto seq, db_->Query("SELECT COALESCE(MAX(seq), 0) + 1 FROM "
                                             "registry_branch_log WHERE model = ? AND branch = ?",
                                             {model, branch}));
  return db_
      ->Exec(
          "INSERT INTO registry_branch_log (model, branch, seq, version, action, by_user, at) "
          "VALUES (?, ?, ?, ?, ?, ?, ?)",
          {model, branch, seq.at(0).Int(0), version, action, by, at})
      .status();
}

Status LocalRegistry::Impl::LogAlias(const std::string& model, const std::string& alias,
                                     std::optional<int64_t> from, std::optional<int64_t> to,
                                     const std::string& by) {
  auto value = [](std::optional<int64_t> v) -> db::Value {
    if (v) return *v;
    return std::monostate{};
  };
  REEL_ASSIGN_OR_RETURN(auto seq, db_->Query("SELECT COALESCE(MAX(seq), 0) + 1 FROM "
                                             "registry_alias_log WHERE model = ?",
                                             {model}));
  return db_
      ->Exec(
          "INSERT INTO registry_alias_log (model, seq, alias, from_version, to_version, "
          "by_user, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
          {model, seq.at(0).Int(0), alias, value(from), value(to), by, Now()})
      .status();
}

LocalRegistry::LocalRegistry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
// A folder registry keeps its last pushes' chunks for the next process's push (chunk_cache.h).
// A cache that cannot be written costs that push its speed, not its correctness.
LocalRegistry::~LocalRegistry() {
  Status kept = impl_->weights().PersistBaseCache();
  if (!kept.ok()) Logger("registry")->warn("delta base cache not kept: {}", kept.ToString());
}

const WeightStore& LocalRegistry::weight_store() const { return impl_->weights(); }

namespace {

Result<std::unique_ptr<LocalRegistry>> OpenLocal(std::unique_ptr<db::Database> db,
                                                 std::shared_ptr<storage::ObjectStore> chunks,
                                                 std::string prefix, RegistryOptions options) {
  REEL_RETURN_IF_ERROR(db::Migrate(*db, "registry", RegistryMigrations()));
  WeightStore weights(std::move(chunks), std::move(prefix), options.weights);
  return std::make_unique<LocalRegistry>(
      std::make_unique<LocalRegistry::Impl>(std::move(db), std::move(weights), std::move(options)));
}

}  // namespace

Result<std::unique_ptr<Registry>> Registry::Open(std::unique_ptr<db::Database> db,
                                                 std::shared_ptr<storage::ObjectStore> chunks,
                                                 std::string prefix, RegistryOptions options) {
  REEL_ASSIGN_OR_RETURN(
      std::unique_ptr<LocalRegistry> r,
      OpenLocal(std::move(db), std::move(chunks), std::move(prefix), std::move(options)));
  return std::unique_ptr<Registry>(std::move(r));
}

namespace {

// A folder registry's absolute, normal path.
Result<std::string> RegistryFolder(const std::string& location) {
  if (location.empty()) return InvalidArgumentError("registry: empty location");
  std::error_code ec;
  std::string folder = std::filesystem::absolute(location, ec).lexically_normal().string();
  if (ec) return InvalidArgumentError("registry " + location + ": " + ec.message());
  return folder;
}

bool IsPostgresUri(const std::string& uri) {
  return uri.rfind("postgresql://", 0) == 0 || uri.rfind("postgres://", 0) == 0;
}

}  // namespace

Result<std::unique_ptr<db::Database>> OpenRegistryDatabase(const std::string& uri) {
  std::unique_ptr<db::Database> db;
  if (IsPostgresUri(uri)) {
    REEL_ASSIGN_OR_RETURN(db, db::Open(uri));
  } else {
    REEL_ASSIGN_OR_RETURN(std::string folder, RegistryFolder(uri));
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) return ErrnoToStatus(ec.value(), "registry " + folder);
    REEL_ASSIGN_OR_RETURN(db, db::OpenSqlite(folder + "/registry.db"));
  }
  REEL_RETURN_IF_ERROR(db::Migrate(*db, "registry", RegistryMigrations()));
  return db;
}

Result<std::unique_ptr<LocalRegistry>> OpenLocalRegistry(const std::string& uri,
                                                         const std::string& chunks,
                                                         RegistryOptions options) {
  if (IsPostgresUri(uri)) {
    if (chunks.empty()) {
      return InvalidArgumentError(
          "a PostgreSQL registry keeps weights in a store: give --chunks "
          "URI (or REEL_REGISTRY_CHUNKS)");
    }
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<db::Database> db, db::Open(uri));
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<storage::ObjectStore> store, storage::OpenStore(chunks));
    return OpenLocal(std::move(db), std::move(store), "", std::move(options));
  }
  REEL_ASSIGN_OR_RETURN(std::string folder, RegistryFolder(uri));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<db::Database> db, OpenRegistryDatabase(folder));
  REEL_ASSIGN_OR_RETURN(auto store, storage::LocalStore::Open(folder));
  if (options.weights.base_cache == nullptr) {
    options.weights.base_cache =
        std::make_shared<ChunkCache>(kDefaultBaseCacheBytes, folder + "/cache/bases");
  }
  return OpenLocal(std::move(db), std::move(store), "weights/", std::move(options));
}

Result<std::unique_ptr<Registry>> Registry::Open(const std::string& location,
                                                 RegistryOptions options) {
  if (IsPostgresUri(location)) {
    return InvalidArgumentError("registry " + location +
                                ": a PostgreSQL registry is opened with its chunk store");
  }
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<LocalRegistry> r,
                        OpenLocalRegistry(location, "", std::move(options)));
  return std::unique_ptr<Registry>(std::move(r));
}

Result<std::optional<VersionInfo>> LocalRegistry::Impl::DeltaBase(const NewVersion& nv) {
  for (const VersionId& p : nv.parents) REEL_RETURN_IF_ERROR(RequireVersion(p));
  std::optional<VersionInfo> base;
  if (!nv.parents.empty()) {
    REEL_ASSIGN_OR_RETURN(base, LoadVersion(nv.parents[0], true));
  } else if (Result<int64_t> head = BranchHead(nv.model, nv.branch); head.ok()) {
    REEL_ASSIGN_OR_RETURN(base, LoadVersion({nv.model, *head}, true));
  }
  return base;
}

Result<VersionInfo> LocalRegistry::Register(const NewVersion& nv, const Actor& who,
                                            PushStats* stats, bool* reused) {
  REEL_RETURN_IF_ERROR(CheckNewVersion(nv));
  Impl& im = *impl_;
  REEL_ASSIGN_OR_RETURN(std::optional<VersionInfo> base, im.DeltaBase(nv));
  // A push reuses chunks already stored; a garbage collection running meanwhile may remove one
  // that no version referenced yet. The commit then sees the collector's generation moved and
  // the push runs again, storing what went missing (registry_gc.cc).
  for (int attempt = 1;; ++attempt) {
    REEL_ASSIGN_OR_RETURN(GcTicket ticket, im.GcTicketForPush(attempt));
    PushedWeights push;
    REEL_ASSIGN_OR_RETURN(
        push.weights, im.weights().Push(nv.weights, base ? &base->weights : nullptr, &push.stats));
    if (nv.optimizer) {
      const WeightManifest* opt_base = base && base->optimizer ? &*base->optimizer : nullptr;
      REEL_ASSIGN_OR_RETURN(push.optimizer,
                            im.weights().Push(*nv.optimizer, opt_base, &push.stats));
    }
    REEL_SYNC_POINT("Registry::Register:Pushed");
    bool raced = false;
    REEL_ASSIGN_OR_RETURN(int64_t number, im.Commit(nv, who, push, ticket, &raced, reused));
    if (raced) continue;
    if (stats != nullptr) *stats = push.stats;
    return im.LoadVersion({nv.model, number}, true);
  }
}

// Adds the version in one transaction: nothing is visible until it commits. *raced: a garbage
// collection ran during the push, nothing was written, and the push must run again.
Result<int64_t> LocalRegistry::Impl::Commit(const NewVersion& nv, const Actor& who,
                                            const PushedWeights& pushed, const GcTicket& ticket,
                                            bool* raced, bool* reused) {
  const WeightManifest& weights = pushed.weights;
  const std::optional<WeightManifest>& optimizer = pushed.optimizer;
  const PushStats& push = pushed.stats;
  Impl& im = *this;
  int64_t number = 0;
  const std::string now = im.Now();
  const std::string weights_id = WeightsId(weights);
  REEL_RETURN_IF_ERROR(im.db().Transact([&]() -> Status {
    db::Database& d = im.db();
    if (reused != nullptr) *reused = false;
    REEL_ASSIGN_OR_RETURN(*raced, im.GcMovedSince(ticket));
    if (*raced) return Status::Ok();
    if (nv.reuse_identical_head) {
      REEL_ASSIGN_OR_RETURN(number, SameHead(d, nv, weights_id));
      if (reused != nullptr) *reused = number != 0;
      if (number != 0) return Status::Ok();
    }
    REEL_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT next_version FROM registry_models WHERE "
                                             "name = ?",
                                             {nv.model}));
    if (rows.empty()) {
      REEL_RETURN_IF_ERROR(d.Exec("INSERT INTO registry_models (name, next_version, created_at, "
                                  "created_by) VALUES (?, 1, ?, ?)",
                                  {nv.model, now, who.name})
                               .status());
      number = 1;
    } else {
      number = rows[0].Int(0);
    }
    REEL_RETURN_IF_ERROR(
        d.Exec("UPDATE registry_models SET next_version = ? WHERE name = ?", {number + 1, nv.model})
            .status());
    for (const VersionId& p : nv.parents) REEL_RETURN_IF_ERROR(im.RequireVersion(p));
    REEL_RETURN_IF_ERROR(d.Exec("INSERT INTO registry_versions (" + std::string(kVersionColumns) +
                                    ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                {nv.model, number, nv.branch, nv.architecture.dump(),
                                 ScalarMetrics(nv.metrics).dump(), nv.recipe.dump(), nv.dataset_uri,
                                 nv.dataset_hash, nv.code_commit, int64_t{nv.code_dirty ? 1 : 0},
                                 who.name, now, nv.message, static_cast<int64_t>(push.raw_bytes),
                                 static_cast<int64_t>(push.stored_bytes), weights_id})
                             .status());
    REEL_RETURN_IF_ERROR(
        d.Exec("INSERT INTO registry_version_documents (model, version, config, metrics, "
               "weights, optimizer) VALUES (?, ?, ?, ?, ?, ?)",
               {nv.model, number, nv.config, nv.metrics.dump(), ManifestToJson(weights),
                optimizer ? db::Value(ManifestToJson(*optimizer)) : db::Value(std::monostate{})})
            .status());
    for (size_t i = 0; i < nv.parents.size(); ++i) {
      REEL_RETURN_IF_ERROR(d.Exec("INSERT INTO registry_parents (model, version, position, "
                                  "parent_model, parent_version) VALUES (?, ?, ?, ?, ?)",
                                  {nv.model, number, static_cast<int64_t>(i), nv.parents[i].model,
                                   nv.parents[i].version})
                               .status());
    }
    for (const auto& [key, value] : nv.tags) {
      REEL_RETURN_IF_ERROR(d.Exec("INSERT INTO registry_tags (model, version, tag, value) VALUES "
                                  "(?, ?, ?, ?)",
                                  {nv.model, number, key, value})
                               .status());
    }
    const std::string action = nv.recipe.contains("op") && nv.recipe["op"].is_string()
                                   ? nv.recipe["op"].get<std::string>()
                                   : "register";
    return im.MoveBranch(nv.model, nv.branch, number, action, who.name);
  }));
  return number;
}

Result<VersionId> LocalRegistry::Resolve(const ModelRef& ref) {
  Impl& im = *impl_;
  REEL_RETURN_IF_ERROR(im.RequireModel(ref.model));
  switch (ref.kind) {
    case ModelRef::Kind::kVersion:
      REEL_RETURN_IF_ERROR(im.RequireVersion({ref.model, ref.version}));
      return VersionId{ref.model, ref.version};
    case ModelRef::Kind::kBranch: {
      REEL_ASSIGN_OR_RETURN(int64_t head, im.BranchHead(ref.model, ref.label));
      return VersionId{ref.model, head};
    }
    case ModelRef::Kind::kAlias:
      break;
  }
  REEL_ASSIGN_OR_RETURN(
      auto rows, im.db().Query("SELECT version FROM registry_aliases WHERE model = ? AND name = ?",
                               {ref.model, ref.label}));
  if (rows.empty()) {
    return NotFoundError("model '" + ref.model + "' has no alias '" + ref.label + "'");
  }
  return VersionId{ref.model, rows[0].Int(0)};
}

Result<VersionInfo> Registry::Get(const std::string& uri) {
  REEL_ASSIGN_OR_RETURN(ModelRef ref, ParseModelUri(uri));
  REEL_ASSIGN_OR_RETURN(VersionId id, Resolve(ref));
  return Get(id);
}

Result<VersionInfo> LocalRegistry::Get(const VersionId& id) { return impl_->LoadVersion(id, true); }

Result<std::vector<VersionId>> LocalRegistry::Parents(const VersionId& id) {
  REEL_RETURN_IF_ERROR(impl_->RequireVersion(id));
  REEL_ASSIGN_OR_RETURN(auto rows, impl_->db().Query("SELECT parent_model, parent_version FROM "
                                                     "registry_parents WHERE model = ? AND "
                                                     "version = ? ORDER BY position",
                                                     {id.model, id.version}));
  std::vector<VersionId> out;
  out.reserve(rows.size());
  for (const db::Row& r : rows) out.push_back({r.Text(0), r.Int(1)});
  return out;
}

Result<std::vector<ModelSummary>> LocalRegistry::ListModels() {
  REEL_ASSIGN_OR_RETURN(
      auto rows,
      impl_->db().Query("SELECT m.name, m.created_at, m.created_by, COUNT(v.version), "
                        "COALESCE(MAX(v.version), 0) FROM registry_models m LEFT JOIN "
                        "registry_versions v ON v.model = m.name GROUP BY m.name, m.created_at, "
                        "m.created_by ORDER BY m.name"));
  std::vector<ModelSummary> out;
  out.reserve(rows.size());
  for (const db::Row& r : rows) {
    out.push_back({r.Text(0), r.Text(1), r.Text(2), r.Int(3), r.Int(4)});
  }
  return out;
}

Result<std::vector<VersionInfo>> LocalRegistry::ListVersions(const std::string& model) {
  Impl& im = *impl_;
  REEL_RETURN_IF_ERROR(im.RequireModel(model));
  REEL_ASSIGN_OR_RETURN(auto rows, im.db().Query("SELECT " + std::string(kVersionColumns) +
                                                     " FROM registry_versions WHERE model = ? "
                                                     "ORDER BY version DESC",
                                                 {model}));
  REEL_ASSIGN_OR_RETURN(std::vector<VersionInfo> out, VersionsFromRows(rows));
  // `out` is newest first, so a version's place is a binary search away.
  const auto find = [&out](int64_t version) -> VersionInfo* {
    const auto it = std::lower_bound(
        out.begin(), out.end(), version,
        [](const VersionInfo& v, int64_t wanted) { return v.id.version > wanted; });
    return it != out.end() && it->id.version == version ? &*it : nullptr;
  };
  // Tags and parents of all of them in two queries, not two per version; in the primary keys'
  // order, so that SQLite sorts nothing (tags land in a map, sorted anyway).
  REEL_ASSIGN_OR_RETURN(auto tags, im.db().Query("SELECT version, tag, value FROM registry_tags "
                                                 "WHERE model = ?",
                                                 {model}));
  for (db::Row& t : tags) {
    if (VersionInfo* v = find(t.Int(0))) v->tags[t.TakeText(1)] = t.TakeText(2);
  }
  REEL_ASSIGN_OR_RETURN(auto parents,
                        im.db().Query("SELECT version, parent_model, parent_version FROM "
                                      "registry_parents WHERE model = ? ORDER BY version, position",
                                      {model}));
  for (db::Row& p : parents) {
    if (VersionInfo* v = find(p.Int(0))) v->parents.push_back({p.TakeText(1), p.Int(2)});
  }
  return out;
}

Result<models::SafetensorsFile> LocalRegistry::PullWeights(const VersionInfo& version) {
  return impl_->weights().Pull(version.weights);
}

Status LocalRegistry::PullWeightsTo(const VersionInfo& version, storage::ObjectWriter& out) {
  return impl_->weights().PullTo(version.weights, out);
}

Status Registry::PullWeightsTo(const VersionInfo& version, storage::ObjectWriter& out) {
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile weights, PullWeights(version));
  REEL_ASSIGN_OR_RETURN(std::string bytes, models::WriteSafetensors(weights));
  return out.Write(bytes);
}

Result<models::SafetensorsFile> LocalRegistry::PullOptimizer(const VersionInfo& version) {
  if (!version.optimizer) {
    return NotFoundError(version.id.ToString() + " was registered without optimiser state");
  }
  return impl_->weights().Pull(*version.optimizer);
}

}  // namespace reel::registry
