// YAML configuration with errors a person can act on: every failure names the file, the line
// and column, and the dotted key, e.g.
//   train.yaml:12:5: key 'optimizer.lr': expected a number, got 'fast'
//   train.yaml:3:1: unknown key 'optimiser' (expected one of: model, optimizer, data)
// Thread-safety: a ConfigNode is an immutable value; concurrent reads are safe.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel {

class ConfigNode {
 public:
  // Errors: NotFound (no such file), InvalidArgument (YAML syntax error, with file:line:col).
  static Result<ConfigNode> LoadFile(const std::string& path);
  // `source_name` stands in for the file name in messages.
  static Result<ConfigNode> LoadString(std::string_view yaml, std::string source_name = "<string>");

  bool IsMap() const;
  bool IsSequence() const;
  bool IsNull() const;
  bool Has(std::string_view key) const;
  std::vector<std::string> Keys() const;  // a map's keys in file order; empty otherwise

  // Child by key. Errors: InvalidArgument when this is not a map, NotFound when the key is absent.
  Result<ConfigNode> Child(std::string_view key) const;
  // Elements of a sequence. Errors: InvalidArgument when this is not a sequence.
  Result<std::vector<ConfigNode>> Elements() const;

  // Typed reads of a child. Errors: NotFound for a missing required key; InvalidArgument when
  // the value does not convert (messages name file:line:col and the dotted key).
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetDouble(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  // Optional variants: the fallback when the key is absent, an error when present but malformed.
  Result<std::string> GetString(std::string_view key, std::string fallback) const;
  Result<int64_t> GetInt(std::string_view key, int64_t fallback) const;
  Result<double> GetDouble(std::string_view key, double fallback) const;
  Result<bool> GetBool(std::string_view key, bool fallback) const;

  // This node's scalar value. Errors as for the typed reads.
  Result<std::string> AsString() const;
  Result<int64_t> AsInt() const;
  Result<double> AsDouble() const;
  Result<bool> AsBool() const;

  // InvalidArgument naming the first key of this map that is not in `allowed` (typos in configs
  // must not be silently ignored).
  Status CheckKeys(const std::vector<std::string>& allowed) const;

  // Every scalar under this node by dotted key ("optimizer.lr" -> "0.002"); a sequence of
  // scalars is one value in flow style ("model.layers" -> "[1, 1, 1, 1]"), other sequences index
  // their elements ("tasks[0].name"); an empty map or null is "{}" / "~". For diffs of configs.
  std::map<std::string, std::string> Flatten() const;

  // "file:line:col: key 'a.b'" — the prefix used in every error about this node.
  std::string Where() const;
  // An InvalidArgument error about this node with Where() prepended.
  Status Error(std::string_view message) const;

  const std::string& path() const { return path_; }  // dotted key from the root, "" for root
  const YAML::Node& yaml() const { return node_; }

 private:
  ConfigNode(const YAML::Node& node, std::shared_ptr<const std::string> source, std::string path);

  YAML::Node node_;
  std::shared_ptr<const std::string> source_;
  std::string path_;
};

}  // namespace reel
