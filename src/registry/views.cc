#include "registry/views.h"

#include <cstdlib>

#include "storage/open.h"

namespace reel::registry {
namespace {

nlohmann::json Ids(const std::vector<VersionId>& ids) {
  nlohmann::json out = nlohmann::json::array();
  for (const VersionId& id : ids) out.push_back(id.ToString());
  return out;
}

nlohmann::json OptionalVersion(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

nlohmann::json VersionJson(const VersionInfo& v, bool manifests) {
  nlohmann::json j = {{"uri", v.id.ToString()},
                      {"model", v.id.model},
                      {"version", v.id.version},
                      {"branch", v.branch},
                      {"author", v.author},
                      {"created_at", v.created_at},
                      {"message", v.message},
                      {"parents", Ids(v.parents)},
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
                      {"has_optimizer", v.optimizer.has_value()},
                      {"config", v.config}};
  if (manifests) {
    j["weights"]["manifest"] = nlohmann::json::parse(ManifestToJson(v.weights));
  }
  return j;
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
    return UnimplementedError(uri +
                              ": a registry server is not supported yet; use a folder or "
                              "postgresql://");
  }
  if (!starts("postgresql://") && !starts("postgres://")) return Registry::Open(uri, options);
  if (chunks.empty()) {
    return InvalidArgumentError(
        "a PostgreSQL registry keeps weights in a store: give --chunks "
        "URI (or REEL_REGISTRY_CHUNKS)");
  }
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<db::Database> db, db::Open(uri));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<storage::ObjectStore> store, storage::OpenStore(chunks));
  return Registry::Open(std::move(db), std::move(store), "", std::move(options));
}

}  // namespace reel::registry
