#include "base/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

namespace reel {
namespace {

// "file:12:5" with 1-based line and column; just "file" for nodes yaml-cpp has no position for
// (the root of an empty document).
std::string Location(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string Prefix(const std::string& source, const YAML::Mark& mark, const std::string& path) {
  std::string out = Location(source, mark);
  if (!path.empty()) out += ": key '" + path + "'";
  return out;
}

std::string JoinKey(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string JoinIndex(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

// What a node is, for "expected X, got Y" messages; scalars are quoted so that stray spaces and
// empty strings are visible.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// The key and value nodes of `key` in map `node`. Found by iterating instead of operator[],
// which on a non-const node would insert and whose const form builds temporaries; iterating
// only reads, which keeps concurrent reads of one ConfigNode safe.
struct Entry {
  YAML::Node key;
  YAML::Node value;
};
std::optional<Entry> FindEntry(const YAML::Node& node, std::string_view key) {
  if (!node.IsMap()) return std::nullopt;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return Entry{it->first, it->second};
  }
  return std::nullopt;
}

std::string_view StripPlus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// YAML 1.2 spells infinities and NaN ".inf", "-.inf", ".nan"; from_chars does not know them.
std::optional<double> YamlSpecialFloat(std::string_view text) {
  const std::string lower = Lower(text);
  if (lower == ".inf" || lower == "+.inf") return std::numeric_limits<double>::infinity();
  if (lower == "-.inf") return -std::numeric_limits<double>::infinity();
  if (lower == ".nan") return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

Status ReadWholeFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;  // EISDIR for a directory
      ::close(fd);
      return ErrnoToStatus(err, path);
    }
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace

ConfigNode::ConfigNode(const YAML::Node& node, std::shared_ptr<const std::string> source,
                       std::string path)
    : node_(node), source_(std::move(source)), path_(std::move(path)) {}

Result<ConfigNode> ConfigNode::LoadFile(const std::string& path) {
  std::string text;
  REEL_RETURN_IF_ERROR(ReadWholeFile(path, &text));
  return LoadString(text, path);
}

Result<ConfigNode> ConfigNode::LoadString(std::string_view yaml, std::string source_name) {
  auto source = std::make_shared<const std::string>(std::move(source_name));
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return ConfigNode(root, std::move(source), "");
  } catch (const YAML::Exception& e) {
    // e.what() repeats the position in yaml-cpp's own 0-based words; e.msg is just the problem.
    return InvalidArgumentError(Location(*source, e.mark) + ": " + e.msg);
  } catch (const std::exception& e) {
    return InternalError(*source + ": " + e.what());
  }
}

bool ConfigNode::IsMap() const { return node_.IsMap(); }
bool ConfigNode::IsSequence() const { return node_.IsSequence(); }
bool ConfigNode::IsNull() const { return node_.IsNull(); }
bool ConfigNode::Has(std::string_view key) const { return FindEntry(node_, key).has_value(); }

std::vector<std::string> ConfigNode::Keys() const {
  std::vector<std::string> keys;
  if (!node_.IsMap()) return keys;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar()) keys.push_back(it->first.Scalar());
  }
  return keys;
}

// A null node ("optimizer:" with every key commented out) counts as an empty map, so that
// optional reads fall back and required ones say which key is missing.
Result<ConfigNode> ConfigNode::Child(std::string_view key) const {
  if (!node_.IsMap() && !node_.IsNull()) {
    return Error("expected a map, got " + Describe(node_));
  }
  auto entry = FindEntry(node_, key);
  if (!entry) {
    return NotFoundError(Prefix(*source_, node_.Mark(), JoinKey(path_, key)) +
                         ": required key is missing");
  }
  return ConfigNode(entry->value, source_, JoinKey(path_, key));
}

// A null node counts as an empty sequence, as for Child.
Result<std::vector<ConfigNode>> ConfigNode::Elements() const {
  std::vector<ConfigNode> elements;
  if (node_.IsNull()) return elements;
  if (!node_.IsSequence()) return Error("expected a sequence, got " + Describe(node_));
  size_t index = 0;
  for (auto it = node_.begin(); it != node_.end(); ++it, ++index) {
    elements.push_back(ConfigNode(*it, source_, JoinIndex(path_, index)));
  }
  return elements;
}

namespace {

bool AllScalars(const YAML::Node& seq) {
  for (const YAML::Node& e : seq) {
    if (!e.IsScalar()) return false;
  }
  return true;
}

void FlattenInto(const YAML::Node& node, const std::string& key,
                 std::map<std::string, std::string>* out) {
  if (node.IsScalar()) {
    (*out)[key] = node.Scalar();
  } else if (node.IsSequence() && AllScalars(node)) {
    std::string flow = "[";
    for (const YAML::Node& e : node) flow += (flow.size() > 1 ? ", " : "") + e.Scalar();
    (*out)[key] = flow + "]";
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      FlattenInto(node[i], key + "[" + std::to_string(i) + "]", out);
    }
  } else if (node.IsMap() && node.size() > 0) {
    for (const auto& kv : node) {
      const std::string child = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      FlattenInto(kv.second, key.empty() ? child : key + "." + child, out);
    }
  } else {
    (*out)[key] = node.IsMap() ? "{}" : "~";
  }
}

}  // namespace

std::map<std::string, std::string> ConfigNode::Flatten() const {
  std::map<std::string, std::string> out;
  if (node_.IsDefined()) FlattenInto(node_, path_, &out);
  return out;
}

Result<std::string> ConfigNode::AsString() const {
  if (!node_.IsScalar()) return Error("expected a string, got " + Describe(node_));
  return node_.Scalar();
}

Result<int64_t> ConfigNode::AsInt() const {
  if (!node_.IsScalar()) return Error("expected an integer, got " + Describe(node_));
  const std::string& text = node_.Scalar();
  const std::string_view digits = StripPlus(text);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return Error("integer '" + text + "' is out of range");
  }
  // from_chars stops at the first non-digit; "12abc" and "1.5" must not read as 12 and 1.
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Error("expected an integer, got " + Describe(node_));
  }
  return value;
}

Result<double> ConfigNode::AsDouble() const {
  if (!node_.IsScalar()) return Error("expected a number, got " + Describe(node_));
  const std::string& text = node_.Scalar();
  if (auto special = YamlSpecialFloat(text)) return *special;
  const std::string_view digits = StripPlus(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return Error("number '" + text + "' is out of range");
  }
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Error("expected a number, got " + Describe(node_));
  }
  return value;
}

Result<bool> ConfigNode::AsBool() const {
  if (node_.IsScalar()) {
    const std::string lower = Lower(node_.Scalar());
    if (lower == "true" || lower == "yes") return true;
    if (lower == "false" || lower == "no") return false;
  }
  return Error("expected a boolean (true, false, yes or no), got " + Describe(node_));
}

Result<std::string> ConfigNode::GetString(std::string_view key) const {
  REEL_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return child.AsString();
}

Result<int64_t> ConfigNode::GetInt(std::string_view key) const {
  REEL_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return child.AsInt();
}

Result<double> ConfigNode::GetDouble(std::string_view key) const {
  REEL_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return child.AsDouble();
}

Result<bool> ConfigNode::GetBool(std::string_view key) const {
  REEL_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return child.AsBool();
}

// The optional reads share one shape: absent -> fallback, anything else -> the required read,
// so that a present but malformed value is still an error.
Result<std::string> ConfigNode::GetString(std::string_view key, std::string fallback) const {
  if ((node_.IsMap() || node_.IsNull()) && !Has(key)) return fallback;
  return GetString(key);
}

Result<int64_t> ConfigNode::GetInt(std::string_view key, int64_t fallback) const {
  if ((node_.IsMap() || node_.IsNull()) && !Has(key)) return fallback;
  return GetInt(key);
}

Result<double> ConfigNode::GetDouble(std::string_view key, double fallback) const {
  if ((node_.IsMap() || node_.IsNull()) && !Has(key)) return fallback;
  return GetDouble(key);
}

Result<bool> ConfigNode::GetBool(std::string_view key, bool fallback) const {
  if ((node_.IsMap() || node_.IsNull()) && !Has(key)) return fallback;
  return GetBool(key);
}

Status ConfigNode::CheckKeys(const std::vector<std::string>& allowed) const {
  if (node_.IsNull()) return Status::Ok();
  if (!node_.IsMap()) return Error("expected a map, got " + Describe(node_));
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : Describe(it->first);
    bool known = false;
    for (const std::string& name : allowed) known = known || name == key;
    if (known) continue;
    std::string expected;
    for (const std::string& name : allowed) expected += (expected.empty() ? "" : ", ") + name;
    expected = expected.empty() ? "no keys are allowed here" : "expected one of: " + expected;
    return InvalidArgumentError(Location(*source_, it->first.Mark()) + ": unknown key '" +
                                JoinKey(path_, key) + "' (" + expected + ")");
  }
  return Status::Ok();
}

std::string ConfigNode::Where() const { return Prefix(*source_, node_.Mark(), path_); }

Status ConfigNode::Error(std::string_view message) const {
  return InvalidArgumentError(Where() + ": " + std::string(message));
}

}  // namespace reel
