#include "console/console.h"

#include <cmath>
#include <utility>

#include "base/json.h"
#include "console/console_internal.h"
#include "http/auth.h"
#include "http/client.h"
#include "registry/remote.h"
#include "registry/views.h"

namespace reel::console {

using http::Request;
using http::Response;
using registry::Role;

nlohmann::json Num(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

Role Caller::Workspace() const { return principal.admin ? Role::kAdmin : principal.RoleFor("*"); }

Role Caller::For(const std::string& model) const {
  return principal.admin ? Role::kAdmin : principal.RoleFor(model);
}

namespace {

bool IsHttp(const std::string& uri) {
  return uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0;
}

// The principal a registry server says holds `token` (its /api/v1/whoami).
Result<registry::Principal> AskRegistryServer(const std::string& url, const std::string& token) {
  http::ClientOptions options;
  options.bearer_token = token;
  options.timeout = std::chrono::seconds(10);
  REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(url, options));
  REEL_ASSIGN_OR_RETURN(nlohmann::json who, client.JsonCall("GET", "/api/v1/whoami", nullptr));
  JsonFields f(who, url + "/api/v1/whoami");
  registry::Principal p;
  p.name = f.String("name");
  p.admin = f.Bool("admin");
  const nlohmann::json& grants = f.Object("grants");
  if (!f.ok()) return DataLossError(f.error());
  for (const auto& [model, role] : grants.items()) {
    if (!role.is_string())
      return DataLossError(url + "/api/v1/whoami: grant of " + model + " is not a role");
    REEL_ASSIGN_OR_RETURN(p.grants[model], registry::ParseRole(role.get<std::string>()));
  }
  return p;
}

Status OpenSources(Console::State* st) {
  const ConsoleOptions& o = st->options;
  if (!o.registry.empty()) {
    st->remote_registry = IsHttp(o.registry);
    if (!st->remote_registry) {
      REEL_ASSIGN_OR_RETURN(st->registry, registry::OpenRegistry(o.registry, o.registry_chunks));
      if (!o.no_auth) {
        REEL_ASSIGN_OR_RETURN(st->access, registry::AccessControl::Open(o.registry));
      }
    }
  } else if (!o.no_auth) {
    return InvalidArgumentError(
        "the console's users are the registry's: give a registry (--registry), or --no-auth "
        "for one person's local use");
  }
  if (!o.pipelines.empty()) {
    REEL_ASSIGN_OR_RETURN(st->pipelines, sched::RunStore::Open(o.pipelines));
  }
  st->serving = std::make_unique<ServingWatcher>(o.serve, o.scrape_ms, o.serving_history);
  return Status::Ok();
}

Response AssetResponse(const Asset& asset) {
  Response r;
  r.headers["Content-Type"] = std::string(asset.content_type) + "; charset=utf-8";
  // The page is built into this binary: a new binary is a new page, so let browsers revalidate.
  r.headers["Cache-Control"] = "no-cache";
  r.body = std::string(asset.bytes);
  return r;
}

Status AddAssetRoutes(http::Router* router) {
  for (const Asset& asset : BuiltInAssets()) {
    const std::string path = asset.path == "/index.html" ? "/" : std::string(asset.path);
    REEL_RETURN_IF_ERROR(
        router->Add("GET", path, [&asset](const Request&) { return AssetResponse(asset); }));
  }
  return Status::Ok();
}

Status AddCoreRoutes(Console::State* st, http::Router* router) {
  REEL_RETURN_IF_ERROR(router->Add("GET", "/ui/api/health", [](const Request&) {
    return Response::Json(200, {{"status", "ok"}});
  }));
  return router->Add(
      "GET", "/ui/api/whoami",
      st->Api(Role::kNone, [st](const Caller& c, const Request&) -> Result<Response> {
        return Response::Json(200, {{"user", c.name},
                                    {"auth", !st->options.no_auth},
                                    {"role", std::string(registry::RoleName(c.Workspace()))}});
      }));
}

Status AddServingRoutes(Console::State* st, http::Router* router) {
  return router->Add(
      "GET", "/ui/api/serving",
      st->Api(Role::kReader, [st](const Caller&, const Request&) -> Result<Response> {
        return Response::Json(200, st->serving->Json());
      }));
}

}  // namespace

Result<Caller> Console::State::Authenticate(const Request& request) {
  Caller c;
  if (options.no_auth) {
    c.name = request.Header("Reel-User").empty() ? "anonymous" : request.Header("Reel-User");
    c.principal.admin = true;
    return c;
  }
  std::optional<std::string> token = http::BearerToken(request);
  if (!token) return http::UnauthenticatedError("a bearer token is required (the registry's)");
  c.token = *token;
  if (remote_registry) {
    REEL_ASSIGN_OR_RETURN(c.principal, AskRegistryServer(options.registry, c.token));
  } else {
    std::lock_guard lock(registry_mu);
    REEL_ASSIGN_OR_RETURN(c.principal, access->Authenticate(c.token));
  }
  c.name = c.principal.name;
  return c;
}

http::Handler Console::State::Api(Role workspace, ApiBody body) {
  return [this, workspace, body = std::move(body)](const Request& request) {
    Result<Caller> caller = Authenticate(request);
    if (!caller.ok()) return Response::Error(caller.status());
    if (caller->Workspace() < workspace) {
      return Response::Error(PermissionDeniedError(caller->name + " needs the " +
                                                   std::string(registry::RoleName(workspace)) +
                                                   " role on '*' (every model) for this page"));
    }
    Result<Response> answer = body(*caller, request);
    return answer.ok() ? std::move(*answer) : Response::Error(answer.status());
  };
}

Result<Response> Console::State::WithRegistry(
    const Caller& caller, const std::function<Result<Response>(registry::Registry&)>& fn) {
  if (options.registry.empty())
    return NotFoundError("no model registry is configured (--registry)");
  if (remote_registry) {
    REEL_ASSIGN_OR_RETURN(auto remote,
                          registry::OpenRemoteRegistry(options.registry, caller.token));
    return fn(*remote);
  }
  std::lock_guard lock(registry_mu);
  return fn(*registry);
}

Result<Response> Console::State::WithPipelines(
    const std::function<Result<Response>(sched::RunStore&)>& fn) {
  if (!pipelines) return NotFoundError("no pipeline state folder is configured (--pipelines)");
  std::lock_guard lock(pipelines_mu);
  return fn(*pipelines);
}

Result<std::string> Console::State::Preview(
    const std::string& folder, const std::string& label,
    const std::function<Result<std::string>(const std::string&, const std::string&)>& make) {
  {
    std::lock_guard lock(previews_mu);
    auto it = previews.find({folder, label});
    if (it != previews.end()) return *it->second;
  }
  REEL_ASSIGN_OR_RETURN(std::string png, make(folder, label));  // outside the lock: it decodes
  std::lock_guard lock(previews_mu);
  previews[{folder, label}] = std::make_shared<const std::string>(png);
  return png;
}

Result<std::unique_ptr<Console>> Console::Open(ConsoleOptions options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  REEL_RETURN_IF_ERROR(OpenSources(state.get()));
  return std::unique_ptr<Console>(new Console(std::move(state)));
}

Console::Console(std::unique_ptr<State> state) : state_(std::move(state)) {}
Console::~Console() = default;

Status Console::AddRoutes(http::Router* router) {
  REEL_RETURN_IF_ERROR(AddAssetRoutes(router));
  REEL_RETURN_IF_ERROR(AddCoreRoutes(state_.get(), router));
  REEL_RETURN_IF_ERROR(AddRunRoutes(state_.get(), router));
  REEL_RETURN_IF_ERROR(AddDatasetRoutes(state_.get(), router));
  REEL_RETURN_IF_ERROR(AddModelRoutes(state_.get(), router));
  REEL_RETURN_IF_ERROR(AddPipelineRoutes(state_.get(), router));
  return AddServingRoutes(state_.get(), router);
}

}  // namespace reel::console
