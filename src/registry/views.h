// The registry's records as JSON, the one shape the CLI's --json and the HTTP API both print.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "registry/registry.h"

namespace reel::registry {

// Without the weight manifests unless `manifests` (they hold every chunk address).
nlohmann::json VersionJson(const VersionInfo& v, bool manifests = false);
nlohmann::json ModelJson(const ModelSummary& m);
nlohmann::json BranchJson(const BranchInfo& b);
nlohmann::json BranchEventJson(const BranchEvent& e);
nlohmann::json AliasJson(const AliasInfo& a);
nlohmann::json AliasEventJson(const AliasEvent& e);

// Opens a registry by URI: a folder (embedded SQLite and weights), or postgresql://... with the
// weights in `chunks` (any store URI). http(s):// (a `reel registry serve`) is Unimplemented
// until the HTTP client lands. Errors: InvalidArgument for a PostgreSQL registry without
// `chunks`; the database's and store's.
// `configured` when set, else $REEL_REGISTRY_URI, else "reel-data/registry".
std::string RegistryUriOrDefault(const std::string& configured);

Result<std::unique_ptr<Registry>> OpenRegistry(const std::string& uri, const std::string& chunks,
                                               RegistryOptions options = {});

}  // namespace reel::registry
