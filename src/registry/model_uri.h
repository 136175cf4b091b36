// Names and URIs of registered models, as every part of Reel writes them:
//   models:/NAME/3              version 3
//   models:/NAME@production     the version an alias points at
//   models:/NAME/branch/main    the head of a branch
//   models:/NAME                the head of branch main
// A name (of a model, branch, alias or tag key) is 1-128 characters of letters, digits, '.',
// '_' and '-', starting with a letter or digit: never a path, so it is safe in URLs, file names
// and object keys.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace reel::registry {

struct ModelRef {
  enum class Kind { kVersion, kAlias, kBranch };
  std::string model;
  Kind kind = Kind::kBranch;
  int64_t version = 0;  // kVersion
  std::string label;    // the alias (kAlias) or branch (kBranch)

  std::string ToString() const;  // the canonical URI
};

// Errors: InvalidArgument saying what is wrong with the URI.
Result<ModelRef> ParseModelUri(std::string_view uri);
bool IsModelUri(std::string_view text);  // starts with models:/

// Errors: InvalidArgument naming `what` ("model name", "alias", ...) and the rule.
Status CheckName(std::string_view name, std::string_view what);

std::string VersionUri(std::string_view model, int64_t version);

}  // namespace reel::registry
