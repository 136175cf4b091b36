#include "registry/service.h"

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/hash.h"
#include "base/json.h"
#include "http/auth.h"
#include "registry/access.h"
#include "registry/registry.h"
#include "registry/registry_impl.h"
#include "registry/views.h"

namespace reel::registry {
namespace {

using http::Request;
using http::Response;

// One io thread's handle on the registry.
struct Session {
  std::unique_ptr<LocalRegistry> registry;
  std::unique_ptr<AccessControl> access;
};

// Who is calling, as the handlers need it.
struct Caller {
  Actor actor;
  Principal principal;
};

using Body = std::function<Result<Response>(Session&, const Caller&, const Request&)>;

Response Ok() { return Response::Json(200, nlohmann::json::object()); }

Result<int64_t> VersionParam(const Request& request) {
  const std::string& text = request.params.at("version");
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n <= 0) {
    return InvalidArgumentError("version '" + text + "': expected a positive integer");
  }
  return static_cast<int64_t>(n);
}

Result<VersionId> VersionOf(const Request& request) {
  REEL_ASSIGN_OR_RETURN(int64_t v, VersionParam(request));
  return VersionId{request.params.at("model"), v};
}

template <typename T, typename F>
nlohmann::json JsonList(const std::vector<T>& items, F to_json) {
  nlohmann::json out = nlohmann::json::array();
  for (const T& item : items) out.push_back(to_json(item));
  return out;
}

// Uploaded bytes that do not parse are the caller's invalid argument, not damaged data.
Status AsInvalidArgument(const Status& s) { return s.ok() ? s : InvalidArgumentError(s.message()); }

// The weights of an upload that sent only the chunks the store lacked (service.h): the chunks
// in `sent_bytes`, each checked against its address, and the stored rest.
Result<models::SafetensorsFile> AssembleUpload(const nlohmann::json& header,
                                               std::string_view sent_bytes,
                                               const WeightStore& store) {
  Result<WeightManifest> manifest =
      ManifestFromJsonValue(header["weights_manifest"], "uploaded weights manifest");
  REEL_RETURN_IF_ERROR(AsInvalidArgument(manifest.status()));
  std::map<std::string, uint64_t> sizes;
  for (const auto& [name, t] : manifest->tensors) {
    for (const ChunkRef& c : t.chunks) sizes.emplace(c.sha256, c.size);
  }
  const nlohmann::json sent = header.value("weights_sent", nlohmann::json::array());
  if (!sent.is_array()) return InvalidArgumentError("registration: weights_sent is not a list");
  std::map<std::string, std::string_view> given;
  uint64_t offset = 0;
  for (const nlohmann::json& a : sent) {
    auto it = a.is_string() ? sizes.find(a.get<std::string>()) : sizes.end();
    if (it == sizes.end())
      return InvalidArgumentError("registration: a sent chunk not in its manifest");
    if (it->second > sent_bytes.size() - offset) {
      return InvalidArgumentError("registration: the chunk bytes end before chunk " + it->first);
    }
    const std::string_view raw = sent_bytes.substr(offset, it->second);
    if (Sha256Hex(raw) != it->first) {
      return InvalidArgumentError("registration: uploaded chunk " + it->first +
                                  " does not match its address");
    }
    given.emplace(it->first, raw);
    offset += it->second;
  }
  if (offset != sent_bytes.size()) {
    return InvalidArgumentError("registration: " + std::to_string(sent_bytes.size() - offset) +
                                " chunk bytes beyond the chunks it names");
  }
  Result<models::SafetensorsFile> file = store.Assemble(*manifest, given);
  if (!file.ok() && file.status().code() == StatusCode::kDataLoss) {
    // A chunk the client was told is stored is gone (collected meanwhile) or damaged: a rerun
    // of the push asks again and sends it.
    return FailedPreconditionError("registration: " + file.status().message() +
                                   "; push again to send it");
  }
  return file;
}

// The registration body: u64 LE length, JSON, weights, optimiser (service.h).
Result<NewVersion> ParseRegistration(const Request& request, const WeightStore& store) {
  const std::string& body = request.body;
  uint64_t n = 0;
  if (body.size() < 8) return InvalidArgumentError("registration body: shorter than its header");
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(body[i]);
  if (n > body.size() - 8) return InvalidArgumentError("registration body: truncated JSON");
  Result<nlohmann::json> doc = ParseJson(std::string_view(body).substr(8, n), "registration");
  if (!doc.ok()) return InvalidArgumentError(doc.status().message());
  NewVersion nv;
  REEL_RETURN_IF_ERROR(NewVersionFromJson(*doc, &nv));
  const uint64_t weights = doc->value("weights_bytes", uint64_t{0});
  const uint64_t optimizer = doc->value("optimizer_bytes", uint64_t{0});
  if (body.size() - 8 - n != weights + optimizer) {
    return InvalidArgumentError("registration body: " + std::to_string(body.size() - 8 - n) +
                                " bytes of tensors, the header announces " +
                                std::to_string(weights + optimizer));
  }
  const std::string_view tensors = std::string_view(body).substr(8 + n);
  auto read = [&](uint64_t offset, uint64_t size,
                  const char* what) -> Result<models::SafetensorsFile> {
    Result<models::SafetensorsFile> file =
        models::ReadSafetensors(tensors.substr(offset, size), what);
    REEL_RETURN_IF_ERROR(AsInvalidArgument(file.status()));
    return file;
  };
  if (doc->contains("weights_manifest")) {
    REEL_ASSIGN_OR_RETURN(nv.weights, AssembleUpload(*doc, tensors.substr(0, weights), store));
  } else {
    REEL_ASSIGN_OR_RETURN(nv.weights, read(0, weights, "uploaded weights"));
  }
  if (optimizer > 0) {
    REEL_ASSIGN_OR_RETURN(nv.optimizer, read(weights, optimizer, "uploaded optimiser state"));
  }
  if (nv.model.empty()) nv.model = request.params.at("model");
  if (nv.model != request.params.at("model")) {
    return InvalidArgumentError("registration of '" + nv.model + "' sent to model '" +
                                request.params.at("model") + "'");
  }
  return nv;
}

// Which of the addresses in {"chunks": [...]} the store lacks.
Result<Response> MissingChunks(const WeightStore& store, const Request& request) {
  REEL_ASSIGN_OR_RETURN(nlohmann::json body, http::JsonObjectBody(request));
  const nlohmann::json chunks = body.value("chunks", nlohmann::json());
  if (!chunks.is_array()) return InvalidArgumentError("request body: expected {\"chunks\": [...]}");
  nlohmann::json missing = nlohmann::json::array();
  for (const nlohmann::json& a : chunks) {
    const std::string address = a.is_string() ? a.get<std::string>() : "";
    if (!IsChunkAddress(address)) {
      return InvalidArgumentError("chunk address '" + a.dump() +
                                  "': expected 64 lower-case hex digits");
    }
    REEL_ASSIGN_OR_RETURN(bool stored, store.HasChunk(address));
    if (!stored) missing.push_back(address);
  }
  return Response::Json(200, {{"missing", missing}});
}

Result<Response> Safetensors(const Result<models::SafetensorsFile>& file) {
  if (!file.ok()) return file.status();
  REEL_ASSIGN_OR_RETURN(std::string bytes, models::WriteSafetensors(*file));
  Response r;
  r.headers["Content-Type"] = "application/octet-stream";
  r.body = std::move(bytes);
  return r;
}

}  // namespace

struct RegistryService::State {
  ServiceOptions options;
  std::mutex mu;
  std::condition_variable freed;
  std::vector<std::unique_ptr<Session>> idle;

  // Lends a session for one request; it goes back when the holder is destroyed.
  struct Lease {
    State* state;
    std::unique_ptr<Session> session;
    ~Lease() {
      std::lock_guard<std::mutex> lock(state->mu);
      state->idle.push_back(std::move(session));
      state->freed.notify_one();
    }
  };
  Lease Borrow() {
    std::unique_lock<std::mutex> lock(mu);
    freed.wait(lock, [&] { return !idle.empty(); });
    std::unique_ptr<Session> session = std::move(idle.back());
    idle.pop_back();
    return Lease{this, std::move(session)};
  }

  Result<Caller> Identify(const Request& request, Session& session) const {
    if (options.no_auth) {
      const std::string user = request.Header("Reel-User");
      return Caller{{user.empty() ? "anonymous" : user, true}, {user, true, {}}};
    }
    std::optional<std::string> token = http::BearerToken(request);
    if (!token) return http::UnauthenticatedError("registry: send Authorization: Bearer <token>");
    REEL_ASSIGN_OR_RETURN(Principal p, session.access->Authenticate(*token));
    return Caller{{p.name, p.admin}, p};
  }

  // The caller, when they hold at least `needed` on the request's model (any model for routes
  // without one, which then filter or check themselves).
  Result<Caller> Authorize(const Request& request, Session& session, Role needed) const {
    REEL_ASSIGN_OR_RETURN(Caller caller, Identify(request, session));
    auto it = request.params.find("model");
    if (it == request.params.end()) return caller;
    REEL_RETURN_IF_ERROR(CheckName(it->second, "model name"));
    const Role role = caller.principal.RoleFor(it->second);
    if (role < needed) {
      return PermissionDeniedError("registry: '" + caller.actor.name + "' is " +
                                   std::string(RoleName(role)) + " of model '" + it->second +
                                   "'; this needs " + std::string(RoleName(needed)));
    }
    caller.actor.admin = role == Role::kAdmin;
    return caller;
  }

  http::Handler Guard(Role needed, Body body) {
    return [this, needed, body = std::move(body)](const Request& request) {
      Lease lease = Borrow();
      Result<Caller> caller = Authorize(request, *lease.session, needed);
      if (!caller.ok()) return Response::Error(caller.status());
      Result<Response> r = body(*lease.session, *caller, request);
      return r.ok() ? std::move(r).value() : Response::Error(r.status());
    };
  }
};

RegistryService::RegistryService(std::unique_ptr<State> state) : state_(std::move(state)) {}
RegistryService::~RegistryService() = default;

Result<std::unique_ptr<RegistryService>> RegistryService::Open(const ServiceOptions& options) {
  if (options.pool < 1) return InvalidArgumentError("registry service: pool must be at least 1");
  auto state = std::make_unique<State>();
  state->options = options;
  // One delta base cache for every session: a run's next checkpoint may reach any of them.
  RegistryOptions shared;
  shared.weights.base_cache = std::make_shared<ChunkCache>(kDefaultBaseCacheBytes);
  for (int i = 0; i < options.pool; ++i) {
    auto session = std::make_unique<Session>();
    REEL_ASSIGN_OR_RETURN(session->registry,
                          OpenLocalRegistry(options.registry_uri, options.chunks, shared));
    REEL_ASSIGN_OR_RETURN(session->access, AccessControl::Open(options.registry_uri));
    state->idle.push_back(std::move(session));
  }
  return std::unique_ptr<RegistryService>(new RegistryService(std::move(state)));
}

namespace {

// Read routes: models, versions, lineage, weights.
Status AddReadRoutes(RegistryService::State& st, http::Router* r) {
  const std::string m = "/api/v1/models/{model}";
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", "/api/v1/whoami",
      st.Guard(Role::kNone, [](Session&, const Caller& c, const Request&) -> Result<Response> {
        nlohmann::json grants = nlohmann::json::object();
        for (const auto& [model, role] : c.principal.grants) grants[model] = RoleName(role);
        return Response::Json(
            200, {{"name", c.actor.name}, {"admin", c.principal.admin}, {"grants", grants}});
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", "/api/v1/models",
      st.Guard(Role::kNone, [](Session& s, const Caller& c, const Request&) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(auto models, s.registry->ListModels());
        nlohmann::json out = nlohmann::json::array();
        for (const ModelSummary& model : models) {
          if (c.principal.RoleFor(model.name) >= Role::kReader) out.push_back(ModelJson(model));
        }
        return Response::Json(200, out);
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/versions",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(auto versions, s.registry->ListVersions(q.params.at("model")));
        return Response::Json(200, JsonList(versions, [](const VersionInfo& v) {
                                return VersionJson(v, VersionView::kListed);
                              }));
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/resolve",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        ModelRef ref{q.params.at("model"), ModelRef::Kind::kBranch, 0, "main"};
        if (auto it = q.query.find("version"); it != q.query.end()) {
          ref.kind = ModelRef::Kind::kVersion;
          REEL_ASSIGN_OR_RETURN(ModelRef parsed,
                                ParseModelUri("models:/" + ref.model + "/" + it->second));
          ref.version = parsed.version;
        } else if (auto a = q.query.find("alias"); a != q.query.end()) {
          ref.kind = ModelRef::Kind::kAlias;
          ref.label = a->second;
        } else if (auto b = q.query.find("branch"); b != q.query.end()) {
          ref.label = b->second;
        }
        REEL_ASSIGN_OR_RETURN(VersionId id, s.registry->Resolve(ref));
        return Response::Json(200, {{"model", id.model}, {"version", id.version}});
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/versions/{version}",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(VersionId id, VersionOf(q));
        REEL_ASSIGN_OR_RETURN(VersionInfo v, s.registry->Get(id));
        return Response::Json(200, VersionJson(v, VersionView::kWithManifests));
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/versions/{version}/parents",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(VersionId id, VersionOf(q));
        REEL_ASSIGN_OR_RETURN(auto parents, s.registry->Parents(id));
        return Response::Json(200, VersionIdsJson(parents));
      })));
  for (const char* part : {"weights", "optimizer"}) {
    const bool weights = std::strcmp(part, "weights") == 0;
    REEL_RETURN_IF_ERROR(
        r->Add("GET", m + "/versions/{version}/" + part,
               st.Guard(Role::kReader,
                        [weights](Session& s, const Caller&, const Request& q) -> Result<Response> {
                          REEL_ASSIGN_OR_RETURN(VersionId id, VersionOf(q));
                          REEL_ASSIGN_OR_RETURN(VersionInfo v, s.registry->Get(id));
                          return Safetensors(weights ? s.registry->PullWeights(v)
                                                     : s.registry->PullOptimizer(v));
                        })));
  }
  return Status::Ok();
}

// Routes that add or remove versions and tags.
Status AddVersionWriteRoutes(RegistryService::State& st, http::Router* r) {
  const std::string v = "/api/v1/models/{model}/versions";
  REEL_RETURN_IF_ERROR(r->Add(
      "POST", v,
      st.Guard(
          Role::kWriter, [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
            REEL_ASSIGN_OR_RETURN(NewVersion nv, ParseRegistration(q, s.registry->weight_store()));
            PushStats stats;
            bool reused = false;
            REEL_ASSIGN_OR_RETURN(VersionInfo info,
                                  s.registry->Register(nv, c.actor, &stats, &reused));
            return Response::Json(reused ? 200 : 201,
                                  {{"version", VersionJson(info, VersionView::kWithManifests)},
                                   {"stats", PushStatsJson(stats)},
                                   {"reused", reused}});
          })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", "/api/v1/models/{model}/chunks",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request&) -> Result<Response> {
        return Response::Json(200, {{"chunk_bytes", s.registry->weight_store().chunk_bytes()}});
      })));
  REEL_RETURN_IF_ERROR(
      r->Add("POST", "/api/v1/models/{model}/chunks/missing",
             st.Guard(Role::kWriter, [](Session& s, const Caller&, const Request& q) {
               return MissingChunks(s.registry->weight_store(), q);
             })));
  REEL_RETURN_IF_ERROR(r->Add(
      "DELETE", v + "/{version}",
      st.Guard(Role::kAdmin, [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(VersionId id, VersionOf(q));
        auto force = q.query.find("force");
        REEL_RETURN_IF_ERROR(
            s.registry->Remove(id, force != q.query.end() && force->second == "true", c.actor));
        return Ok();
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "PUT", v + "/{version}/tags/{key}",
      st.Guard(Role::kWriter, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(VersionId id, VersionOf(q));
        REEL_ASSIGN_OR_RETURN(nlohmann::json body, http::JsonObjectBody(q));
        JsonFields f(body, "");
        const std::string value = f.String("value");
        if (!f.ok()) return InvalidArgumentError(f.error());
        REEL_RETURN_IF_ERROR(s.registry->SetTag(id, q.params.at("key"), value));
        return Ok();
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "DELETE", v + "/{version}/tags/{key}",
      st.Guard(Role::kWriter, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(VersionId id, VersionOf(q));
        REEL_RETURN_IF_ERROR(s.registry->RemoveTag(id, q.params.at("key")));
        return Ok();
      })));
  return Status::Ok();
}

// Branches, aliases and garbage collection.
Status AddRefRoutes(RegistryService::State& st, http::Router* r) {
  const std::string m = "/api/v1/models/{model}";
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/branches",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(auto branches, s.registry->ListBranches(q.params.at("model")));
        return Response::Json(200, JsonList(branches, BranchJson));
      })));
  REEL_RETURN_IF_ERROR(
      r->Add("POST", m + "/branches",
             st.Guard(Role::kWriter,
                      [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
                        REEL_ASSIGN_OR_RETURN(nlohmann::json body, http::JsonObjectBody(q));
                        JsonFields f(body, "");
                        const std::string name = f.String("name");
                        const int64_t from = f.Int("from");
                        if (!f.ok()) return InvalidArgumentError(f.error());
                        REEL_RETURN_IF_ERROR(
                            s.registry->CreateBranch(q.params.at("model"), name, from, c.actor));
                        return Response::Json(201, nlohmann::json::object());
                      })));
  REEL_RETURN_IF_ERROR(
      r->Add("DELETE", m + "/branches/{branch}",
             st.Guard(Role::kWriter,
                      [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
                        REEL_RETURN_IF_ERROR(s.registry->DeleteBranch(
                            q.params.at("model"), q.params.at("branch"), c.actor));
                        return Ok();
                      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/branches/{branch}/log",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(auto log,
                              s.registry->Log(q.params.at("model"), q.params.at("branch")));
        return Response::Json(200, JsonList(log, BranchEventJson));
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/aliases",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(auto aliases, s.registry->ListAliases(q.params.at("model")));
        return Response::Json(200, JsonList(aliases, AliasJson));
      })));
  REEL_RETURN_IF_ERROR(
      r->Add("PUT", m + "/aliases/{alias}",
             st.Guard(Role::kWriter,
                      [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
                        REEL_ASSIGN_OR_RETURN(nlohmann::json body, http::JsonObjectBody(q));
                        JsonFields f(body, "");
                        const int64_t version = f.Int("version");
                        std::optional<bool> protect;
                        if (body.contains("protected")) protect = f.Bool("protected");
                        if (!f.ok()) return InvalidArgumentError(f.error());
                        REEL_RETURN_IF_ERROR(s.registry->SetAlias(
                            q.params.at("model"), q.params.at("alias"), version, c.actor, protect));
                        return Ok();
                      })));
  REEL_RETURN_IF_ERROR(
      r->Add("DELETE", m + "/aliases/{alias}",
             st.Guard(Role::kWriter,
                      [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
                        REEL_RETURN_IF_ERROR(s.registry->RemoveAlias(
                            q.params.at("model"), q.params.at("alias"), c.actor));
                        return Ok();
                      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "GET", m + "/alias-history",
      st.Guard(Role::kReader, [](Session& s, const Caller&, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(auto history, s.registry->AliasHistory(q.params.at("model")));
        return Response::Json(200, JsonList(history, AliasEventJson));
      })));
  REEL_RETURN_IF_ERROR(r->Add(
      "POST", "/api/v1/gc",
      st.Guard(Role::kNone, [](Session& s, const Caller& c, const Request& q) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(nlohmann::json body, http::JsonObjectBody(q));
        GcOptions options;
        JsonFields f(body, "");
        if (body.contains("grace_ms")) options.grace_ms = f.Int("grace_ms");
        if (body.contains("dry_run")) options.dry_run = f.Bool("dry_run");
        if (!f.ok()) return InvalidArgumentError(f.error());
        REEL_ASSIGN_OR_RETURN(GcStats stats, s.registry->CollectGarbage(options, c.actor));
        return Response::Json(200, {{"chunks_live", stats.chunks_live},
                                    {"chunks_removed", stats.chunks_removed},
                                    {"chunks_young", stats.chunks_young},
                                    {"bytes_removed", stats.bytes_removed},
                                    {"chunks_missing", stats.chunks_missing}});
      })));
  return Status::Ok();
}

}  // namespace

Status RegistryService::AddRoutes(http::Router* router) {
  REEL_RETURN_IF_ERROR(router->Add("GET", "/api/v1/health", [](const Request&) {
    return Response::Json(200, {{"status", "ok"}});
  }));
  REEL_RETURN_IF_ERROR(AddReadRoutes(*state_, router));
  REEL_RETURN_IF_ERROR(AddVersionWriteRoutes(*state_, router));
  return AddRefRoutes(*state_, router);
}

}  // namespace reel::registry
