// The one way Reel reads JSON: parsing that returns a Status instead of throwing, and typed,
// exception-free reads of object fields whose errors name the field's path
// ("splits.train.shards[2].records: expected an unsigned integer, got string").
//
//   REEL_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, "manifest.json"));
//   JsonFields f(doc, "");
//   int64_t step = f.Int("step");
//   if (!f.ok()) return DataLossError("manifest.json: " + f.error());
//
// Thread-safety: values; a JsonFields refers to its object, which must outlive it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace reel {

// Parses `text`; a syntax error is DataLoss "what: <parser's message>" (stored bytes that do not
// parse are corrupt; callers parsing user input may change the code).
inline Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what) {
  try {
    return nlohmann::json::parse(text);  // nlohmann's exceptions stop here
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(std::string(what) + ": not valid JSON: " + e.what());
  }
}

class JsonFields {
 public:
  // `path` names `object` in errors ("" for the document's root).
  JsonFields(const nlohmann::json& object, std::string path)
      : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) Fail(path_.empty() ? "document" : path_, "expected an object");
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  // Each returns a default and records an error when the field is missing or has another type.
  std::string String(const char* key) {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return {};
    if (!v->is_string()) return Mismatch(key, "a string", *v), std::string();
    return v->get_ref<const std::string&>();
  }
  uint64_t Uint(const char* key) {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned()) return Mismatch(key, "an unsigned integer", *v), 0;
    return v->get<uint64_t>();
  }
  int64_t Int(const char* key) {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) return Mismatch(key, "an integer", *v), 0;
    if (v->is_number_unsigned()) {
      uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Mismatch(key, "a 64-bit integer", *v), 0;
      return static_cast<int64_t>(u);
    }
    return v->get<int64_t>();
  }
  const nlohmann::json& Array(const char* key) {
    return Typed(key, "an array", &nlohmann::json::is_array);
  }
  const nlohmann::json& Object(const char* key) {
    return Typed(key, "an object", &nlohmann::json::is_object);
  }
  double Double(const char* key) {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return 0;
    if (!v->is_number()) return Mismatch(key, "a number", *v), 0.0;
    return v->get<double>();
  }
  bool Bool(const char* key) {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return Mismatch(key, "a boolean", *v), false;
    return v->get<bool>();
  }
  bool Has(const char* key) const { return object_.is_object() && object_.contains(key); }

  void Fail(const std::string& where, const std::string& what) {
    if (error_.empty()) error_ = where + ": " + what;
  }

 private:
  const nlohmann::json* Find(const char* key) {
    if (!ok()) return nullptr;
    auto it = object_.find(key);
    if (it == object_.end()) {
      Fail(Path(key), "missing");
      return nullptr;
    }
    return &*it;
  }
  void Mismatch(const char* key, const char* expected, const nlohmann::json& got) {
    Fail(Path(key), std::string("expected ") + expected + ", got " +
                        (got.is_number() ? got.dump() : std::string(got.type_name())));
  }
  const nlohmann::json& Typed(const char* key, const char* expected,
                              bool (nlohmann::json::*check)() const noexcept) {
    static const nlohmann::json kNull;
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return kNull;
    if (!((*v).*check)()) {
      Mismatch(key, expected, *v);
      return kNull;
    }
    return *v;
  }

  const nlohmann::json& object_;
  std::string path_;
  std::string error_;
};

}  // namespace reel
