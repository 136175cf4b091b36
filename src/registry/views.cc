#include "registry/views.h"

#include <cstdlib>

#include "base/json.h"
#include "registry/registry_impl.h"
#include "registry/remote.h"

namespace reel::registry {
namespace {

// Tags as JSON sends them: an object of strings. DataLoss naming `what` otherwise.
Result<std::map<std::string, std::string>> TagsFromJson(const nlohmann::json& tags,
                                                        const std::string& what) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : tags.items()) {
    if (!value.is_string()) return DataLossError(what + "." + key + ": expected a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

nlohmann::json OptionalVersion(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

nlohmann::json VersionJson(const VersionInfo& v, VersionView view) {
  nlohmann::json j = {{"uri", v.id.ToString()},
                      {"model", v.id.model},
                      {"version", v.id.version},
                      {"branch", v.branch},
                      {"author", v.author},
                      {"created_at", v.created_at},
                      {"message", v.message},
                      {"parents", VersionIdsJson(v.parents)},
                      {"tags", v.tags},
                      {"architecture", v.architecture},
                      {"metrics", v.metrics},
                      {"recipe", v.recipe},
                      {"dataset", {{"uri", v.dataset_uri}, {"manifest_sha256", v.dataset_hash}}},
                      {"code", {{"commit", v.code_commit}, {"dirty", v.code_dirty}}},
                      {"weights",
                       {{"id", v.weights_id},
                        {"bytes", v.weight_bytes},
                        {"stored_bytes", v.stored_bytes},
                        {"tensors", v.weights.tensors.size()}}},
                      {"has_optimizer", v.optimizer.has_value()}};
  if (view != VersionView::kListed) j["config"] = v.config;
  if (view == VersionView::kWithManifests) {
    j["weights"]["manifest"] = ManifestJson(v.weights);
    if (v.optimizer) j["optimizer_manifest"] = ManifestJson(*v.optimizer);
  }
  return j;
}

Result<VersionInfo> VersionFromJson(const nlohmann::json& j, const std::string& what) {
  JsonFields f(j, what);
  VersionInfo v;
  v.id.model = f.String("model");
  v.id.version = f.Int("version");
  v.branch = f.String("branch");
  v.author = f.String("author");
  v.created_at = f.String("created_at");
  v.message = f.String("message");
  const nlohmann::json& parents = f.Array("parents");
  const nlohmann::json& tags = f.Object("tags");
  v.architecture = f.Object("architecture");
  v.metrics = f.Object("metrics");
  v.recipe = f.Object("recipe");
  if (f.Has("config")) v.config = f.String("config");
  JsonFields dataset(f.Object("dataset"), f.Path("dataset"));
  JsonFields code(f.Object("code"), f.Path("code"));
  JsonFields weights(f.Object("weights"), f.Path("weights"));
  v.dataset_uri = dataset.String("uri");
  v.dataset_hash = dataset.String("manifest_sha256");
  v.code_commit = code.String("commit");
  v.code_dirty = code.Bool("dirty");
  v.weights_id = weights.String("id");
  v.weight_bytes = weights.Uint("bytes");
  v.stored_bytes = weights.Uint("stored_bytes");
  for (JsonFields* g : {&dataset, &code, &weights}) {
    if (!g->ok()) return DataLossError(g->error());
  }
  if (!f.ok()) return DataLossError(f.error());
  REEL_ASSIGN_OR_RETURN(v.parents, VersionIdsFromJson(parents, what + ".parents"));
  REEL_ASSIGN_OR_RETURN(v.tags, TagsFromJson(tags, what + ".tags"));
  if (const auto it = j["weights"].find("manifest"); it != j["weights"].end()) {
    REEL_ASSIGN_OR_RETURN(v.weights, ManifestFromJsonValue(*it, what + ".weights.manifest"));
  }
  if (const auto it = j.find("optimizer_manifest"); it != j.end()) {
    REEL_ASSIGN_OR_RETURN(v.optimizer, ManifestFromJsonValue(*it, what + ".optimizer_manifest"));
  }
  return v;
}

Result<ModelSummary> ModelFromJson(const nlohmann::json& j, const std::string& what) {
  JsonFields f(j, what);
  ModelSummary m{f.String("name"), f.String("created_at"), f.String("created_by"),
                 f.Int("versions"), f.Int("latest")};
  if (!f.ok()) return DataLossError(f.error());
  return m;
}

Result<BranchInfo> BranchFromJson(const nlohmann::json& j, const std::string& what) {
  JsonFields f(j, what);
  BranchInfo b{f.String("name"), f.Int("head"), f.String("updated_at")};
  if (!f.ok()) return DataLossError(f.error());
  return b;
}

Result<BranchEvent> BranchEventFromJson(const nlohmann::json& j, const std::string& what) {
  JsonFields f(j, what);
  BranchEvent e{f.Int("seq"), f.Int("version"), f.String("action"), f.String("by"), f.String("at")};
  if (!f.ok()) return DataLossError(f.error());
  return e;
}

Result<AliasInfo> AliasFromJson(const nlohmann::json& j, const std::string& what) {
  JsonFields f(j, what);
  AliasInfo a{f.String("name"), f.Int("version"), f.Bool("protected"), f.String("updated_by"),
              f.String("updated_at")};
  if (!f.ok()) return DataLossError(f.error());
  return a;
}

Result<AliasEvent> AliasEventFromJson(const nlohmann::json& j, const std::string& what) {
  JsonFields f(j, what);
  AliasEvent e;
  e.seq = f.Int("seq");
  e.alias = f.String("alias");
  e.by = f.String("by");
  e.at = f.String("at");
  if (!f.ok()) return DataLossError(f.error());
  for (const char* key : {"from", "to"}) {
    const nlohmann::json v = j.value(key, nlohmann::json());
    if (!v.is_null() && !v.is_number_integer()) {
      return DataLossError(what + "." + key + ": expected a version or null");
    }
    if (v.is_null()) continue;
    (std::string(key) == "from" ? e.from : e.to) = v.get<int64_t>();
  }
  return e;
}

nlohmann::json PushStatsJson(const PushStats& s) {
  return {{"raw_bytes", s.raw_bytes},
          {"stored_bytes", s.stored_bytes},
          {"chunks", s.chunks},
          {"chunks_written", s.chunks_written},
          {"deltas_written", s.deltas_written}};
}

PushStats PushStatsFromJson(const nlohmann::json& j) {
  // Figures for a report only: a field a server did not send reads as 0.
  auto get = [&](const char* key) { return j.is_object() ? j.value(key, uint64_t{0}) : 0; };
  return {get("raw_bytes"), get("stored_bytes"), static_cast<int>(get("chunks")),
          static_cast<int>(get("chunks_written")), static_cast<int>(get("deltas_written"))};
}

nlohmann::json VersionIdsJson(const std::vector<VersionId>& ids) {
  nlohmann::json out = nlohmann::json::array();
  for (const VersionId& id : ids) out.push_back(id.ToString());
  return out;
}

Result<std::vector<VersionId>> VersionIdsFromJson(const nlohmann::json& uris,
                                                  const std::string& what) {
  if (!uris.is_array()) return DataLossError(what + ": expected an array of version URIs");
  std::vector<VersionId> out;
  for (const nlohmann::json& u : uris) {
    Result<ModelRef> ref = u.is_string() ? ParseModelUri(u.get<std::string>())
                                         : Result<ModelRef>(InvalidArgumentError("not a string"));
    if (!ref.ok() || ref->kind != ModelRef::Kind::kVersion) {
      return DataLossError(what + ": expected version URIs (models:/NAME/N), got " + u.dump());
    }
    out.push_back({ref->model, ref->version});
  }
  return out;
}

nlohmann::json NewVersionJson(const NewVersion& v) {
  return {{"model", v.model},
          {"branch", v.branch},
          {"architecture", v.architecture},
          {"config", v.config},
          {"metrics", v.metrics},
          {"dataset", {{"uri", v.dataset_uri}, {"manifest_sha256", v.dataset_hash}}},
          {"code", {{"commit", v.code_commit}, {"dirty", v.code_dirty}}},
          {"parents", VersionIdsJson(v.parents)},
          {"message", v.message},
          {"tags", v.tags},
          {"recipe", v.recipe},
          {"reuse_identical_head", v.reuse_identical_head}};
}

Status NewVersionFromJson(const nlohmann::json& j, NewVersion* v) {
  JsonFields f(j, "registration");
  v->model = f.String("model");
  v->branch = f.String("branch");
  v->architecture = f.Object("architecture");
  v->config = f.String("config");
  v->metrics = f.Object("metrics");
  v->recipe = f.Object("recipe");
  v->message = f.String("message");
  v->reuse_identical_head = f.Bool("reuse_identical_head");
  const nlohmann::json& parents = f.Array("parents");
  const nlohmann::json& tags = f.Object("tags");
  JsonFields dataset(f.Object("dataset"), f.Path("dataset"));
  JsonFields code(f.Object("code"), f.Path("code"));
  v->dataset_uri = dataset.String("uri");
  v->dataset_hash = dataset.String("manifest_sha256");
  v->code_commit = code.String("commit");
  v->code_dirty = code.Bool("dirty");
  for (JsonFields* g : {&f, &dataset, &code}) {
    if (!g->ok()) return InvalidArgumentError(g->error());
  }
  // The caller sent these: a bad one is its invalid argument, not damaged data.
  Result<std::vector<VersionId>> ids = VersionIdsFromJson(parents, "registration.parents");
  if (!ids.ok()) return InvalidArgumentError(ids.status().message());
  Result<std::map<std::string, std::string>> t = TagsFromJson(tags, "registration.tags");
  if (!t.ok()) return InvalidArgumentError(t.status().message());
  v->parents = std::move(ids).value();
  v->tags = std::move(t).value();
  return Status::Ok();
}

nlohmann::json ModelJson(const ModelSummary& m) {
  return {{"name", m.name},
          {"versions", m.versions},
          {"latest", m.latest},
          {"created_at", m.created_at},
          {"created_by", m.created_by}};
}

nlohmann::json BranchJson(const BranchInfo& b) {
  return {{"name", b.name}, {"head", b.head}, {"updated_at", b.updated_at}};
}

nlohmann::json BranchEventJson(const BranchEvent& e) {
  return {{"seq", e.seq}, {"version", e.version}, {"action", e.action}, {"by", e.by}, {"at", e.at}};
}

nlohmann::json AliasJson(const AliasInfo& a) {
  return {{"name", a.name},
          {"version", a.version},
          {"protected", a.protected_},
          {"updated_by", a.updated_by},
          {"updated_at", a.updated_at}};
}

nlohmann::json AliasEventJson(const AliasEvent& e) {
  return {{"seq", e.seq},
          {"alias", e.alias},
          {"from", OptionalVersion(e.from)},
          {"to", OptionalVersion(e.to)},
          {"by", e.by},
          {"at", e.at}};
}

std::string RegistryUriOrDefault(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* env = std::getenv("REEL_REGISTRY_URI");
  return env != nullptr && *env != '\0' ? env : "reel-data/registry";
}

Result<std::unique_ptr<Registry>> OpenRegistry(const std::string& uri, const std::string& chunks,
                                               RegistryOptions options) {
  auto starts = [&](const char* prefix) { return uri.rfind(prefix, 0) == 0; };
  if (starts("http://") || starts("https://")) {
    const char* token = std::getenv("REEL_REGISTRY_TOKEN");
    return OpenRemoteRegistry(uri, token != nullptr ? token : "");
  }
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<LocalRegistry> local,
                        OpenLocalRegistry(uri, chunks, std::move(options)));
  return std::unique_ptr<Registry>(std::move(local));
}

}  // namespace reel::registry
