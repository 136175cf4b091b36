// How `reel models` shows the registry: tables for people, JSON (--json) for programs, and the
// export folder's files.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/safetensors.h"
#include "registry/diff.h"
#include "registry/registry.h"

namespace reel::cli {

int PrintJson(const nlohmann::json& j);  // returns 0, the exit code

nlohmann::json ModelsJson(const std::vector<registry::ModelSummary>& models);
nlohmann::json VersionsJson(const std::vector<registry::VersionInfo>& versions);
nlohmann::json LogJson(const std::vector<registry::BranchEvent>& log);
nlohmann::json BranchesJson(const std::vector<registry::BranchInfo>& branches);
nlohmann::json AliasesJson(const std::vector<registry::AliasInfo>& aliases,
                           const std::vector<registry::AliasEvent>& history);

void PrintRegistered(const registry::VersionInfo& v, const registry::PushStats& stats);
void PrintModels(const std::vector<registry::ModelSummary>& models);
void PrintVersions(const std::vector<registry::VersionInfo>& versions,
                   const std::vector<registry::AliasInfo>& aliases);
void PrintVersion(const registry::VersionInfo& v, const std::vector<registry::AliasInfo>& aliases);
void PrintLog(const std::string& model, const std::string& branch,
              const std::vector<registry::BranchEvent>& log,
              const std::vector<registry::VersionInfo>& versions);
void PrintDiff(const registry::VersionDiff& d);
void PrintBranches(const std::vector<registry::BranchInfo>& branches);
void PrintAliases(const std::string& model, const std::vector<registry::AliasInfo>& aliases,
                  const std::vector<registry::AliasEvent>& history);

// DIR/config.yaml (the version's config, or its model section when it was registered without
// one), DIR/version.json, and last DIR/model.safetensors, whose bytes `write_weights` writes;
// each written to a temporary name and renamed, so the weights' presence marks a whole export.
// Errors: AlreadyExists when DIR already holds an export; write_weights'; the file system's.
Status ExportVersion(const registry::VersionInfo& v, const std::string& dir,
                     const std::function<Status(storage::ObjectWriter&)>& write_weights);

}  // namespace reel::cli
