#include "registry/model_uri.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "base/strings.h"

namespace reel::registry {
namespace {

constexpr std::string_view kScheme = "models:/";
constexpr size_t kMaxName = 128;

bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

Result<int64_t> ParseVersionNumber(std::string_view text, std::string_view uri) {
  int64_t v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || v > (int64_t{1} << 50)) {
      return InvalidArgumentError("model URI '" + PrintableForMessage(uri) +
                                  "': a version is a positive number, not '" +
                                  PrintableForMessage(text) + "'");
    }
    v = v * 10 + (c - '0');
  }
  if (text.empty() || v == 0) {
    return InvalidArgumentError("model URI '" + PrintableForMessage(uri) +
                                "': versions count from 1");
  }
  return v;
}

}  // namespace

Status CheckName(std::string_view name, std::string_view what) {
  const bool ok_chars = std::all_of(name.begin(), name.end(), NameChar);
  if (name.empty() || name.size() > kMaxName || !ok_chars ||
      !std::isalnum(static_cast<unsigned char>(name[0]))) {
    return InvalidArgumentError(std::string(what) + " '" + PrintableForMessage(name) +
                                "' is not a valid name: use 1-128 letters, digits, '.', '_' or "
                                "'-', starting with a letter or digit");
  }
  return Status::Ok();
}

bool IsModelUri(std::string_view text) { return text.substr(0, kScheme.size()) == kScheme; }

Result<ModelRef> ParseModelUri(std::string_view uri) {
  if (!IsModelUri(uri)) {
    return InvalidArgumentError("'" + PrintableForMessage(uri) +
                                "' is not a model URI: expected models:/NAME/VERSION, "
                                "models:/NAME@ALIAS or models:/NAME/branch/BRANCH");
  }
  std::string_view rest = uri.substr(kScheme.size());
  ModelRef ref;
  const size_t at = rest.find('@');
  if (at != std::string_view::npos) {
    ref.model = std::string(rest.substr(0, at));
    ref.kind = ModelRef::Kind::kAlias;
    ref.label = std::string(rest.substr(at + 1));
    REEL_RETURN_IF_ERROR(CheckName(ref.model, "model name"));
    REEL_RETURN_IF_ERROR(CheckName(ref.label, "alias"));
    return ref;
  }
  const size_t slash = rest.find('/');
  ref.model = std::string(rest.substr(0, slash));
  REEL_RETURN_IF_ERROR(CheckName(ref.model, "model name"));
  if (slash == std::string_view::npos) {
    ref.label = "main";
    return ref;
  }
  std::string_view tail = rest.substr(slash + 1);
  if (tail.substr(0, 7) == "branch/") {
    ref.label = std::string(tail.substr(7));
    REEL_RETURN_IF_ERROR(CheckName(ref.label, "branch"));
    return ref;
  }
  ref.kind = ModelRef::Kind::kVersion;
  REEL_ASSIGN_OR_RETURN(ref.version, ParseVersionNumber(tail, uri));
  return ref;
}

std::string VersionUri(std::string_view model, int64_t version) {
  return std::string(kScheme) + std::string(model) + "/" + std::to_string(version);
}

std::string ModelRef::ToString() const {
  switch (kind) {
    case Kind::kVersion:
      return VersionUri(model, version);
    case Kind::kAlias:
      return std::string(kScheme) + model + "@" + label;
    case Kind::kBranch:
      break;
  }
  return std::string(kScheme) + model + "/branch/" + label;
}

}  // namespace reel::registry
