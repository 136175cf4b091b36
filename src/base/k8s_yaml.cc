#include "base/k8s_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

namespace reel {
namespace {

using OrderedJson = nlohmann::ordered_json;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// A string YAML reads back as the same string when written without quotes: no number, boolean
// or null look-alike (YAML 1.1's yes/no/on/off among them), no character YAML gives a meaning.
bool PlainYamlString(const std::string& s) {
  if (s.empty() || !(IsAsciiAlpha(s[0]) || s[0] == '/' || s[0] == '_')) return false;
  const bool simple = std::all_of(s.begin(), s.end(), [](char c) {
    return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '.' || c == '/' || c == '-';
  });
  if (!simple) return false;
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  });
  static const std::set<std::string> kWords = {"y",   "n",    "yes",   "no",  "on",
                                               "off", "true", "false", "null"};
  return kWords.count(lower) == 0;
}

void EmitYaml(const OrderedJson& j, YAML::Emitter* out) {
  switch (j.type()) {
    case OrderedJson::value_t::object:
      *out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        *out << YAML::Key;
        EmitYaml(OrderedJson(key), out);
        *out << YAML::Value;
        EmitYaml(value, out);
      }
      *out << YAML::EndMap;
      break;
    case OrderedJson::value_t::array:
      *out << YAML::BeginSeq;
      for (const OrderedJson& item : j) EmitYaml(item, out);
      *out << YAML::EndSeq;
      break;
    case OrderedJson::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (PlainYamlString(s)) {
        *out << s;
      } else {
        *out << YAML::DoubleQuoted << s;
      }
      break;
    }
    case OrderedJson::value_t::boolean:
      *out << j.get<bool>();
      break;
    case OrderedJson::value_t::number_integer:
    case OrderedJson::value_t::number_unsigned:
      *out << j.get<int64_t>();
      break;
    default:  // manifests hold no floats, nulls or binary
      *out << YAML::Null;
      break;
  }
}

}  // namespace

// RFC 1123 label (a-z0-9 and '-', alphanumeric at both ends, 63 at most); `letter_first` makes it
// the RFC 1035 label Kubernetes wants for Service names.
bool IsDnsLabel(std::string_view s, bool letter_first) {
  if (s.empty() || s.size() > 63) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  if (letter_first && IsAsciiDigit(s.front())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// RFC 1123 subdomain: dot-separated labels, 253 at most (Secret names).
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start), false)) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

nlohmann::ordered_json K8sMetadata(const std::string& name, const std::string& k8s_namespace,
                                   const nlohmann::ordered_json& labels) {
  OrderedJson m = OrderedJson::object();
  m["name"] = name;
  if (!k8s_namespace.empty()) m["namespace"] = k8s_namespace;
  m["labels"] = labels;
  return m;
}

Result<std::string> K8sManifests(const std::vector<nlohmann::ordered_json>& objects) {
  std::string yaml;
  for (const OrderedJson& object : objects) {
    YAML::Emitter out;
    EmitYaml(object, &out);
    if (!out.good()) return InternalError("emitting Kubernetes YAML: " + out.GetLastError());
    yaml += "---\n";
    yaml += out.c_str();
    yaml += "\n";
  }
  return yaml;
}

}  // namespace reel
