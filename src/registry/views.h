// The registry's records as JSON, the one shape the CLI's --json and the HTTP API both print.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "registry/registry.h"

namespace reel::registry {

// What a version's JSON holds: a listing's entry (without the config and the manifests, which a
// listing does not load), the whole version but its manifests, or with them too (they hold
// every chunk address).
enum class VersionView { kListed, kWhole, kWithManifests };
nlohmann::json VersionJson(const VersionInfo& v, VersionView view = VersionView::kWhole);
// The inverse of VersionJson, for a registry's HTTP client; with its config and manifests when
// the JSON has them. Errors: DataLoss naming `what` and the field.
Result<VersionInfo> VersionFromJson(const nlohmann::json& j, const std::string& what);
Result<ModelSummary> ModelFromJson(const nlohmann::json& j, const std::string& what);
Result<BranchInfo> BranchFromJson(const nlohmann::json& j, const std::string& what);
Result<BranchEvent> BranchEventFromJson(const nlohmann::json& j, const std::string& what);
Result<AliasInfo> AliasFromJson(const nlohmann::json& j, const std::string& what);
Result<AliasEvent> AliasEventFromJson(const nlohmann::json& j, const std::string& what);
// Version ids as a JSON array of URIs ("models:/clf/3"), and back (DataLoss naming `what`).
nlohmann::json VersionIdsJson(const std::vector<VersionId>& ids);
Result<std::vector<VersionId>> VersionIdsFromJson(const nlohmann::json& uris,
                                                  const std::string& what);
nlohmann::json PushStatsJson(const PushStats& s);
PushStats PushStatsFromJson(const nlohmann::json& j);

// A registration's fields other than its weights (which travel as safetensors bytes), and back.
nlohmann::json NewVersionJson(const NewVersion& v);
Status NewVersionFromJson(const nlohmann::json& j, NewVersion* v);

nlohmann::json ModelJson(const ModelSummary& m);
nlohmann::json BranchJson(const BranchInfo& b);
nlohmann::json BranchEventJson(const BranchEvent& e);
nlohmann::json AliasJson(const AliasInfo& a);
nlohmann::json AliasEventJson(const AliasEvent& e);

// `configured` when set, else $REEL_REGISTRY_URI, else "reel-data/registry".
std::string RegistryUriOrDefault(const std::string& configured);

// Opens a registry by URI: a folder (embedded SQLite and weights), postgresql://... with the
// weights in `chunks` (any store URI), or http://host:port of a `reel registry serve` (its token
// from $REEL_REGISTRY_TOKEN). Errors: InvalidArgument for a PostgreSQL registry without
// `chunks`; the database's, store's or server's.
Result<std::unique_ptr<Registry>> OpenRegistry(const std::string& uri, const std::string& chunks,
                                               RegistryOptions options = {});

}  // namespace reel::registry
