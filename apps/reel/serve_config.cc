// serve.yaml, and the command line's models, as the list of models `reel serve` loads.
#include <filesystem>
#include <string>
#include <vector>

#include "apps/reel/serve_flags.h"
#include "base/config.h"
#include "registry/model_uri.h"

namespace reel::cli {
namespace {

// A path in the file, relative to the file's folder unless absolute or a URI.
std::string Near(const std::string& file, const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find("://") != std::string::npos ||
      registry::IsModelUri(path)) {
    return path;
  }
  return (std::filesystem::path(file).parent_path() / path).lexically_normal().string();
}

Result<std::vector<int>> IntList(const ConfigNode& node) {
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> items, node.Elements());
  std::vector<int> out;
  for (const ConfigNode& item : items) {
    REEL_ASSIGN_OR_RETURN(int64_t v, item.AsInt());
    out.push_back(static_cast<int>(v));
  }
  return out;
}

Result<std::vector<std::string>> StringList(const ConfigNode& node) {
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> items, node.Elements());
  std::vector<std::string> out;
  for (const ConfigNode& item : items) {
    REEL_ASSIGN_OR_RETURN(std::string v, item.AsString());
    out.push_back(std::move(v));
  }
  return out;
}

// One entry of `models:`, on top of the command line's batching.
Result<ModelSpec> ReadModel(const ConfigNode& m, const std::string& file, const ServeFlags& f) {
  REEL_RETURN_IF_ERROR(
      m.CheckKeys({"uri", "name", "config", "max_batch", "max_delay_us", "preferred_batch",
                   "instances", "max_queue", "canary", "canary_percent"}));
  ModelSpec spec;
  REEL_ASSIGN_OR_RETURN(spec.source, m.GetString("uri"));
  spec.source = Near(file, spec.source);
  REEL_ASSIGN_OR_RETURN(spec.name, m.GetString("name", ""));
  if (!spec.name.empty()) REEL_RETURN_IF_ERROR(registry::CheckName(spec.name, "model name"));
  REEL_ASSIGN_OR_RETURN(std::string config, m.GetString("config", ""));
  spec.config = Near(file, config);
  serve::BatcherOptions& b = spec.batching;
  b = Batching(f);
  REEL_ASSIGN_OR_RETURN(int64_t max_batch, m.GetInt("max_batch", b.max_batch));
  REEL_ASSIGN_OR_RETURN(int64_t delay, m.GetInt("max_delay_us", b.max_delay.count()));
  REEL_ASSIGN_OR_RETURN(int64_t instances, m.GetInt("instances", b.instances));
  REEL_ASSIGN_OR_RETURN(int64_t max_queue, m.GetInt("max_queue", b.max_queue));
  b.max_batch = static_cast<int>(max_batch);
  b.max_delay = std::chrono::microseconds(delay);
  b.instances = static_cast<int>(instances);
  b.max_queue = static_cast<int>(max_queue);
  if (m.Has("preferred_batch")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode preferred, m.Child("preferred_batch"));
    REEL_ASSIGN_OR_RETURN(b.preferred_batch_sizes, IntList(preferred));
  }
  if (Status s = b.Validate(); !s.ok()) return m.Error(s.message());
  REEL_ASSIGN_OR_RETURN(std::string canary, m.GetString("canary", ""));
  spec.canary = Near(file, canary);
  REEL_ASSIGN_OR_RETURN(int64_t percent, m.GetInt("canary_percent", f.canary_percent));
  if (percent < 0 || percent > 100) return m.Error("canary_percent is 0-100");
  spec.canary_percent = static_cast<int>(percent);
  return spec;
}

// The server-wide keys of serve.yaml.
Status ReadServerKeys(const ConfigNode& root, const std::string& file, ServeFlags* f) {
  if (root.Has("allow_uri_prefix")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode prefixes, root.Child("allow_uri_prefix"));
    REEL_ASSIGN_OR_RETURN(std::vector<std::string> list, StringList(prefixes));
    for (const std::string& p : list) f->allowed_uri_prefixes.push_back(Near(file, p));
  }
  REEL_ASSIGN_OR_RETURN(f->poll_interval_s, root.GetDouble("poll_interval", f->poll_interval_s));
  REEL_ASSIGN_OR_RETURN(f->max_request_mb, root.GetDouble("max_request_mb", f->max_request_mb));
  REEL_ASSIGN_OR_RETURN(std::string tokens, root.GetString("token_file", ""));
  if (!tokens.empty()) f->token_file = Near(file, tokens);
  if (f->poll_interval_s < 0) return root.Error("poll_interval must be >= 0");
  if (f->max_request_mb <= 0) return root.Error("max_request_mb must be > 0");
  return Status::Ok();
}

Status ReadServeConfig(const ConfigNode& root, const std::string& file, ServeFlags* f) {
  REEL_RETURN_IF_ERROR(root.CheckKeys(
      {"models", "allow_uri_prefix", "poll_interval", "token_file", "max_request_mb"}));
  REEL_RETURN_IF_ERROR(ReadServerKeys(root, file, f));
  REEL_ASSIGN_OR_RETURN(ConfigNode models, root.Child("models"));
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> entries, models.Elements());
  if (entries.empty()) return models.Error("lists no model");
  for (const ConfigNode& m : entries) {
    REEL_ASSIGN_OR_RETURN(ModelSpec spec, ReadModel(m, file, *f));
    f->specs.push_back(std::move(spec));
  }
  return Status::Ok();
}

}  // namespace

serve::BatcherOptions Batching(const ServeFlags& f) {
  serve::BatcherOptions b;
  b.max_batch = f.max_batch;
  b.max_delay = std::chrono::microseconds(f.max_delay_us);
  b.preferred_batch_sizes = f.preferred;
  b.instances = f.instances;
  b.max_queue = f.max_queue;
  return b;
}

Status ResolveModelSpecs(ServeFlags* f) {
  for (const std::string& arg : f->models) {
    REEL_ASSIGN_OR_RETURN(ModelArg m, ParseModelArg(arg));
    ModelSpec spec;
    spec.name = m.name;
    spec.source = m.source;
    spec.config = f->config;
    spec.batching = Batching(*f);
    f->specs.push_back(std::move(spec));
  }
  if (f->config.empty()) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(f->config));
  if (!root.IsMap() || !root.Has("models")) return Status::Ok();  // a model's config
  f->serve_config = f->config;
  f->config.clear();
  for (ModelSpec& spec : f->specs) spec.config.clear();
  return ReadServeConfig(root, f->serve_config, f);
}

// "name=URI" or "URI". A '=' after a ':' or '/' belongs to the URI or path.
Result<ModelArg> ParseModelArg(const std::string& arg) {
  const size_t eq = arg.find('=');
  const size_t special = arg.find_first_of(":/");
  if (eq == std::string::npos || (special != std::string::npos && special < eq)) {
    return ModelArg{"", arg};
  }
  ModelArg m{arg.substr(0, eq), arg.substr(eq + 1)};
  REEL_RETURN_IF_ERROR(registry::CheckName(m.name, "model name"));
  if (m.source.empty()) return InvalidArgumentError("'" + arg + "': nothing after '='");
  return m;
}

}  // namespace reel::cli
