#include "registry/remote.h"

#include <chrono>
#include <set>
#include <utility>

#include "base/json.h"
#include "http/client.h"
#include "registry/service.h"
#include "registry/views.h"
#include "registry/weight_store.h"

namespace reel::registry {
namespace {

// Weights of a large model take a while to send and to chunk.
constexpr std::chrono::minutes kTimeout{10};

std::string Versions(const std::string& model) { return "/api/v1/models/" + model + "/versions"; }
std::string VersionPath(const VersionId& id) {
  return Versions(id.model) + "/" + std::to_string(id.version);
}

// Names go into paths as they are: CheckName allows only characters that need no escaping.
Status CheckNames(std::initializer_list<std::pair<const std::string*, const char*>> names) {
  for (const auto& [name, what] : names) REEL_RETURN_IF_ERROR(CheckName(*name, what));
  return Status::Ok();
}

template <typename T, typename F>
Result<std::vector<T>> ListOf(const nlohmann::json& doc, const std::string& what, F from_json) {
  if (!doc.is_array()) return DataLossError(what + ": expected a JSON array");
  std::vector<T> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    REEL_ASSIGN_OR_RETURN(T item, from_json(doc[i], what + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(item));
  }
  return out;
}

std::string Framed(const nlohmann::json& header, const std::string& weights,
                   const std::string& optimizer) {
  const std::string json = header.dump();
  std::string body(8, '\0');
  for (int i = 0; i < 8; ++i) body[i] = static_cast<char>(json.size() >> (8 * i) & 0xff);
  body.reserve(8 + json.size() + weights.size() + optimizer.size());
  body += json;
  body += weights;
  body += optimizer;
  return body;
}

class RemoteRegistry final : public Registry {
 public:
  explicit RemoteRegistry(http::Client client) : client_(std::move(client)) {}

  using Registry::Get;

  // Sends only the weight chunks the server lacks: the manifest names them all, the body holds
  // the bytes of the missing ones (service.h). A rerun after an interrupted push sends only
  // what the first run did not get stored.
  Result<VersionInfo> Register(const NewVersion& nv, const Actor& who, PushStats* stats,
                               bool* reused) override {
    REEL_RETURN_IF_ERROR(CheckName(nv.model, "model name"));
    REEL_ASSIGN_OR_RETURN(Upload upload, PrepareUpload(nv));
    std::string optimizer;
    if (nv.optimizer) {
      REEL_ASSIGN_OR_RETURN(optimizer, models::WriteSafetensors(*nv.optimizer));
    }
    nlohmann::json header = NewVersionJson(nv);
    header["weights_manifest"] = ManifestJson(upload.manifest);
    header["weights_sent"] = upload.sent;
    header["weights_bytes"] = upload.bytes.size();
    header["optimizer_bytes"] = optimizer.size();
    REEL_ASSIGN_OR_RETURN(nlohmann::json answer,
                          Call("POST", Versions(nv.model), Framed(header, upload.bytes, optimizer),
                               kRegistrationContentType, who));
    if (!answer.is_object() || !answer.contains("version")) {
      return DataLossError(client_.base_url() + ": a registration answer without its version");
    }
    if (stats != nullptr) {
      *stats = PushStatsFromJson(answer.value("stats", nlohmann::json()));
      stats->chunks_uploaded = static_cast<int>(upload.sent.size());
      stats->uploaded_bytes = upload.bytes.size() + optimizer.size();
    }
    if (reused != nullptr) *reused = answer.value("reused", false);
    return VersionFromJson(answer["version"], "registered version");
  }

  Result<VersionInfo> Get(const VersionId& id) override {
    REEL_RETURN_IF_ERROR(CheckName(id.model, "model name"));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", VersionPath(id)));
    return VersionFromJson(doc, id.ToString());
  }

  Result<VersionId> Resolve(const ModelRef& ref) override {
    REEL_RETURN_IF_ERROR(CheckName(ref.model, "model name"));
    std::string query;
    switch (ref.kind) {
      case ModelRef::Kind::kVersion:
        query = "version=" + std::to_string(ref.version);
        break;
      case ModelRef::Kind::kAlias:
        REEL_RETURN_IF_ERROR(CheckName(ref.label, "alias"));
        query = "alias=" + ref.label;
        break;
      case ModelRef::Kind::kBranch:
        REEL_RETURN_IF_ERROR(CheckName(ref.label, "branch"));
        query = "branch=" + ref.label;
        break;
    }
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc,
                          Json("GET", "/api/v1/models/" + ref.model + "/resolve?" + query));
    if (!doc.is_object() || !doc.value("version", nlohmann::json()).is_number_integer()) {
      return DataLossError(client_.base_url() + ": a resolve answer without a version");
    }
    return VersionId{ref.model, doc["version"].get<int64_t>()};
  }

  Result<std::vector<VersionId>> Parents(const VersionId& id) override {
    REEL_RETURN_IF_ERROR(CheckName(id.model, "model name"));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", VersionPath(id) + "/parents"));
    return VersionIdsFromJson(doc, id.ToString() + " parents");
  }

  Result<std::vector<ModelSummary>> ListModels() override {
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", "/api/v1/models"));
    return ListOf<ModelSummary>(doc, "models", ModelFromJson);
  }

  Result<std::vector<VersionInfo>> ListVersions(const std::string& model) override {
    REEL_RETURN_IF_ERROR(CheckName(model, "model name"));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", Versions(model)));
    return ListOf<VersionInfo>(doc, "versions", VersionFromJson);
  }

  Result<std::vector<BranchInfo>> ListBranches(const std::string& model) override {
    REEL_RETURN_IF_ERROR(CheckName(model, "model name"));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", Model(model) + "/branches"));
    return ListOf<BranchInfo>(doc, "branches", BranchFromJson);
  }

  Status CreateBranch(const std::string& model, const std::string& branch, int64_t from,
                      const Actor& who) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&model, "model name"}, {&branch, "branch"}}));
    const nlohmann::json body = {{"name", branch}, {"from", from}};
    return Call("POST", Model(model) + "/branches", body.dump(), "application/json", who).status();
  }

  Status DeleteBranch(const std::string& model, const std::string& branch,
                      const Actor& who) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&model, "model name"}, {&branch, "branch"}}));
    return Call("DELETE", Model(model) + "/branches/" + branch, "", "", who).status();
  }

  Result<std::vector<BranchEvent>> Log(const std::string& model,
                                       const std::string& branch) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&model, "model name"}, {&branch, "branch"}}));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc,
                          Json("GET", Model(model) + "/branches/" + branch + "/log"));
    return ListOf<BranchEvent>(doc, "log", BranchEventFromJson);
  }

  Result<std::vector<AliasInfo>> ListAliases(const std::string& model) override {
    REEL_RETURN_IF_ERROR(CheckName(model, "model name"));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", Model(model) + "/aliases"));
    return ListOf<AliasInfo>(doc, "aliases", AliasFromJson);
  }

  Status SetAlias(const std::string& model, const std::string& alias, int64_t version,
                  const Actor& who, std::optional<bool> protect) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&model, "model name"}, {&alias, "alias"}}));
    nlohmann::json body = {{"version", version}};
    if (protect) body["protected"] = *protect;
    return Call("PUT", Model(model) + "/aliases/" + alias, body.dump(), "application/json", who)
        .status();
  }

  Status RemoveAlias(const std::string& model, const std::string& alias,
                     const Actor& who) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&model, "model name"}, {&alias, "alias"}}));
    return Call("DELETE", Model(model) + "/aliases/" + alias, "", "", who).status();
  }

  Result<std::vector<AliasEvent>> AliasHistory(const std::string& model) override {
    REEL_RETURN_IF_ERROR(CheckName(model, "model name"));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, Json("GET", Model(model) + "/alias-history"));
    return ListOf<AliasEvent>(doc, "alias history", AliasEventFromJson);
  }

  Status SetTag(const VersionId& id, const std::string& key, const std::string& value) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&id.model, "model name"}, {&key, "tag"}}));
    const nlohmann::json body = {{"value", value}};
    return Call("PUT", VersionPath(id) + "/tags/" + key, body.dump(), "application/json", Actor{})
        .status();
  }

  Status RemoveTag(const VersionId& id, const std::string& key) override {
    REEL_RETURN_IF_ERROR(CheckNames({{&id.model, "model name"}, {&key, "tag"}}));
    return Call("DELETE", VersionPath(id) + "/tags/" + key, "", "", Actor{}).status();
  }

  Status Remove(const VersionId& id, bool force, const Actor& who) override {
    REEL_RETURN_IF_ERROR(CheckName(id.model, "model name"));
    return Call("DELETE", VersionPath(id) + (force ? "?force=true" : ""), "", "", who).status();
  }

  Result<GcStats> CollectGarbage(const GcOptions& options, const Actor& who) override {
    const nlohmann::json body = {{"grace_ms", options.grace_ms}, {"dry_run", options.dry_run}};
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc,
                          Call("POST", "/api/v1/gc", body.dump(), "application/json", who));
    if (!doc.is_object())
      return DataLossError(client_.base_url() + ": a gc answer without figures");
    GcStats stats;
    stats.chunks_live = doc.value("chunks_live", int64_t{0});
    stats.chunks_removed = doc.value("chunks_removed", int64_t{0});
    stats.chunks_young = doc.value("chunks_young", int64_t{0});
    stats.bytes_removed = doc.value("bytes_removed", uint64_t{0});
    stats.chunks_missing = doc.value("chunks_missing", int64_t{0});
    return stats;
  }

  Result<models::SafetensorsFile> PullWeights(const VersionInfo& version) override {
    return Pull(version.id, "weights");
  }
  Result<models::SafetensorsFile> PullOptimizer(const VersionInfo& version) override {
    return Pull(version.id, "optimizer");
  }

 private:
  static std::string Model(const std::string& model) { return "/api/v1/models/" + model; }

  // The weights cut as the server cuts them, and the bytes of the chunks it lacks, each once.
  struct Upload {
    WeightManifest manifest;
    std::vector<std::string> sent;  // addresses, in the order of their bytes
    std::string bytes;
  };
  Result<Upload> PrepareUpload(const NewVersion& nv) {
    REEL_ASSIGN_OR_RETURN(nlohmann::json layout, Json("GET", Model(nv.model) + "/chunks"));
    const nlohmann::json chunk_bytes = layout.value("chunk_bytes", nlohmann::json());
    if (!chunk_bytes.is_number_unsigned()) {
      return DataLossError(client_.base_url() + ": a chunk layout without chunk_bytes");
    }
    Upload up;
    REEL_ASSIGN_OR_RETURN(up.manifest, DescribeChunks(nv.weights, chunk_bytes.get<uint64_t>()));
    nlohmann::json addresses = nlohmann::json::array();
    for (const auto& [name, t] : up.manifest.tensors) {
      for (const ChunkRef& c : t.chunks) addresses.push_back(c.sha256);
    }
    const nlohmann::json query = {{"chunks", addresses}};
    REEL_ASSIGN_OR_RETURN(nlohmann::json answer, Call("POST", Model(nv.model) + "/chunks/missing",
                                                      query.dump(), "application/json", Actor{}));
    std::set<std::string> missing;
    if (!answer.is_object() || !answer.value("missing", nlohmann::json()).is_array()) {
      return DataLossError(client_.base_url() + ": a missing-chunks answer without its list");
    }
    for (const nlohmann::json& a : answer["missing"]) {
      if (a.is_string()) missing.insert(a.get<std::string>());
    }
    for (const auto& [name, t] : up.manifest.tensors) {
      const models::TensorBytes& tensor = nv.weights.tensors.at(name);
      const std::vector<std::string_view> pieces = SplitIntoChunks(
          tensor.data, static_cast<int>(models::DtypeSize(tensor.dtype)), chunk_bytes);
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (missing.erase(t.chunks[i].sha256) == 0) continue;  // stored, or sent already
        up.sent.push_back(t.chunks[i].sha256);
        up.bytes += pieces[i];
      }
    }
    return up;
  }

  Result<models::SafetensorsFile> Pull(const VersionId& id, const std::string& part) {
    REEL_RETURN_IF_ERROR(CheckName(id.model, "model name"));
    const std::string target = VersionPath(id) + "/" + part;
    REEL_ASSIGN_OR_RETURN(http::Response r, client_.Get(target));
    if (r.status / 100 != 2) return http::StatusFromResponse(r, "GET " + target);
    return models::ReadSafetensors(r.body, id.ToString() + " " + part + " from the server");
  }

  Result<nlohmann::json> Json(const std::string& method, const std::string& target) {
    return client_.JsonCall(method, target, nullptr);
  }

  // A call that changes something. The server knows the caller by the token (or, without auth,
  // by the Reel-User header every request carries), not by `who`.
  Result<nlohmann::json> Call(const std::string& method, const std::string& target,
                              const std::string& body, const std::string& content_type,
                              const Actor& /*who*/) {
    REEL_ASSIGN_OR_RETURN(http::Response r, client_.Send(method, target, body, content_type));
    if (r.status / 100 != 2) {
      return http::StatusFromResponse(r, method + " " + client_.base_url() + target);
    }
    if (r.body.empty()) return nlohmann::json();
    Result<nlohmann::json> doc = ParseJson(r.body, method + " " + target);
    return doc;
  }

  http::Client client_;
};

}  // namespace

Result<std::unique_ptr<Registry>> OpenRemoteRegistry(const std::string& url,
                                                     const std::string& token) {
  http::ClientOptions options;
  options.timeout = kTimeout;
  options.bearer_token = token;
  options.headers["Reel-User"] = Actor::Local().name;
  REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(url, options));
  return std::unique_ptr<Registry>(new RemoteRegistry(std::move(client)));
}

}  // namespace reel::registry
