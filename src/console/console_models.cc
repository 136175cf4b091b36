// /ui/api/models..., /ui/api/diff: the model registry as the console shows it, each model behind
// its reader role, an alias move behind writer (the registry itself wants admin when protected).
#include <optional>
#include <set>

#include "base/strings.h"
#include "console/console_internal.h"
#include "registry/diff.h"
#include "registry/model_uri.h"
#include "registry/views.h"

namespace reel::console {
namespace {

using http::Request;
using http::Response;
using registry::Registry;
using registry::Role;

Status Require(const Caller& c, const std::string& model, Role role) {
  if (c.For(model) >= role) return Status::Ok();
  return PermissionDeniedError(c.name + " needs the " + std::string(registry::RoleName(role)) +
                               " role on model " + model);
}

nlohmann::json AliasesJson(const std::vector<registry::AliasInfo>& aliases) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : aliases) out.push_back(registry::AliasJson(a));
  return out;
}

// A listed version with the figures a table shows flattened out.
nlohmann::json VersionRow(const registry::VersionInfo& v, registry::VersionView view) {
  nlohmann::json j = registry::VersionJson(v, view);
  j["weight_bytes"] = v.weight_bytes;
  j["stored_bytes"] = v.stored_bytes;
  j["dataset_uri"] = v.dataset_uri;
  return j;
}

Result<Response> ListModels(const Caller& c, Registry& r) {
  REEL_ASSIGN_OR_RETURN(auto models, r.ListModels());
  nlohmann::json out = nlohmann::json::array();
  for (const registry::ModelSummary& m : models) {
    if (c.For(m.name) < Role::kReader) continue;
    REEL_ASSIGN_OR_RETURN(auto aliases, r.ListAliases(m.name));
    nlohmann::json j = registry::ModelJson(m);
    j["aliases"] = AliasesJson(aliases);
    out.push_back(std::move(j));
  }
  return Response::Json(200, {{"models", std::move(out)}});
}

Result<Response> ShowModel(const Caller& c, Registry& r, const std::string& model) {
  REEL_ASSIGN_OR_RETURN(auto versions, r.ListVersions(model));
  REEL_ASSIGN_OR_RETURN(auto branches, r.ListBranches(model));
  REEL_ASSIGN_OR_RETURN(auto aliases, r.ListAliases(model));
  REEL_ASSIGN_OR_RETURN(auto history, r.AliasHistory(model));
  nlohmann::json v = nlohmann::json::array(), b = nlohmann::json::array(),
                 h = nlohmann::json::array();
  for (const auto& version : versions)
    v.push_back(VersionRow(version, registry::VersionView::kListed));
  for (const auto& branch : branches) b.push_back(registry::BranchJson(branch));
  for (const auto& event : history) h.push_back(registry::AliasEventJson(event));
  return Response::Json(200, {{"name", model},
                              {"versions", std::move(v)},
                              {"branches", std::move(b)},
                              {"aliases", AliasesJson(aliases)},
                              {"alias_history", std::move(h)},
                              {"role", std::string(registry::RoleName(c.For(model)))}});
}

Result<int64_t> PositiveInt(const std::string& text, const std::string& what) {
  const std::optional<int64_t> n = ParseInt64(text);
  if (!n || *n <= 0) {
    return InvalidArgumentError(what + " '" + text + "': expected a positive integer");
  }
  return *n;
}

Result<Response> ShowVersion(Registry& r, const std::string& model, const std::string& version) {
  REEL_ASSIGN_OR_RETURN(int64_t n, PositiveInt(version, "version"));
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo v, r.Get(registry::VersionId{model, n}));
  nlohmann::json j = VersionRow(v, registry::VersionView::kWhole);
  j["report"] = v.metrics;  // Get returns the whole evaluation report
  return Response::Json(200, j);
}

// Versions of `model` and where they came from: parents (outside the model too), datasets and
// the runs they were registered from.
Result<Response> Lineage(Registry& r, const std::string& model) {
  REEL_ASSIGN_OR_RETURN(auto versions, r.ListVersions(model));
  REEL_ASSIGN_OR_RETURN(auto aliases, r.ListAliases(model));
  nlohmann::json nodes = nlohmann::json::array(), edges = nlohmann::json::array();
  std::set<std::string> known, datasets;
  for (const auto& v : versions) known.insert(v.id.ToString());
  for (const auto& v : versions) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& a : aliases) {
      if (a.version == v.id.version) names.push_back(a.name);
    }
    nodes.push_back({{"id", v.id.ToString()},
                     {"kind", "version"},
                     {"label", "v" + std::to_string(v.id.version)},
                     {"version", v.id.version},
                     {"branch", v.branch},
                     {"aliases", std::move(names)},
                     {"top1", v.metrics.contains("top1") ? v.metrics["top1"] : nlohmann::json()},
                     {"recipe_op", v.recipe.is_object() ? v.recipe.value("op", nlohmann::json())
                                                        : nlohmann::json()}});
    for (const auto& p : v.parents) {
      const std::string id = p.ToString();
      if (known.insert(id).second) {
        nodes.push_back({{"id", id}, {"kind", "external"}, {"label", id}});
      }
      edges.push_back({{"from", id}, {"to", v.id.ToString()}, {"kind", "parent"}});
    }
    if (!v.dataset_uri.empty()) {
      const std::string id = "dataset:" + v.dataset_uri;
      if (datasets.insert(id).second) {
        nodes.push_back({{"id", id}, {"kind", "dataset"}, {"label", v.dataset_uri}});
      }
      edges.push_back({{"from", id}, {"to", v.id.ToString()}, {"kind", "data"}});
    }
    // The run (or checkpoint folder) a version was registered from, which `reel train` and
    // `reel models register` record as the recipe's source.
    const auto source = v.recipe.is_object() ? v.recipe.find("source") : v.recipe.end();
    if (v.recipe.is_object() && source != v.recipe.end() && source->is_string()) {
      const std::string id = "run:" + source->get<std::string>();
      if (datasets.insert(id).second) {
        nodes.push_back({{"id", id}, {"kind", "run"}, {"label", *source}});
      }
      edges.push_back({{"from", id}, {"to", v.id.ToString()}, {"kind", "run"}});
    }
  }
  return Response::Json(200, {{"nodes", std::move(nodes)}, {"edges", std::move(edges)}});
}

Result<Response> Diff(const Caller& c, Registry& r, const Request& request) {
  const auto a_it = request.query.find("a"), b_it = request.query.find("b");
  if (a_it == request.query.end() || b_it == request.query.end()) {
    return InvalidArgumentError("diff needs two version URIs: ?a=models:/m/1&b=models:/m/2");
  }
  for (const auto* uri : {&a_it->second, &b_it->second}) {
    REEL_ASSIGN_OR_RETURN(registry::ModelRef ref, registry::ParseModelUri(*uri));
    REEL_RETURN_IF_ERROR(Require(c, ref.model, Role::kReader));
  }
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo a, r.Get(a_it->second));
  REEL_ASSIGN_OR_RETURN(registry::VersionInfo b, r.Get(b_it->second));
  REEL_ASSIGN_OR_RETURN(registry::VersionDiff diff, registry::DiffVersions(r, a, b));
  // `reel models diff --json`'s document, with the tensor counts a page shows first.
  nlohmann::json out = diff.ToJson();
  nlohmann::json& counts = out["counts"] = nlohmann::json::object();
  for (auto kind :
       {registry::TensorChange::Kind::kUnchanged, registry::TensorChange::Kind::kChanged,
        registry::TensorChange::Kind::kAdded, registry::TensorChange::Kind::kRemoved,
        registry::TensorChange::Kind::kShapeChanged}) {
    counts[std::string(registry::TensorChangeName(kind))] = diff.Count(kind);
  }
  return Response::Json(200, out);
}

Result<Response> MoveAlias(const Caller& c, Registry& r, const Request& request) {
  const std::string& model = request.params.at("model");
  const std::string& alias = request.params.at("alias");
  REEL_RETURN_IF_ERROR(Require(c, model, Role::kWriter));
  REEL_ASSIGN_OR_RETURN(nlohmann::json body, http::JsonObjectBody(request));
  if (!body.contains("version") || !body["version"].is_number_integer()) {
    return InvalidArgumentError("request body: expected {\"version\": <integer>}");
  }
  const registry::Actor who{c.name, c.For(model) >= Role::kAdmin};
  REEL_RETURN_IF_ERROR(r.SetAlias(model, alias, body["version"].get<int64_t>(), who));
  REEL_ASSIGN_OR_RETURN(auto aliases, r.ListAliases(model));
  return Response::Json(200, {{"aliases", AliasesJson(aliases)}});
}

}  // namespace

Status AddModelRoutes(Console::State* st, http::Router* router) {
  // Per model routes check the model's role themselves: no workspace role is needed.
  const auto add = [&](const char* method, const char* path, auto fn) {
    return router->Add(method, path,
                       st->Api(Role::kNone, [st, fn](const Caller& c, const Request& r) {
                         return st->WithRegistry(c, [&](Registry& reg) { return fn(c, reg, r); });
                       }));
  };
  const auto model_page = [&](const char* path, auto fn) {
    return add("GET", path,
               [fn](const Caller& c, Registry& reg, const Request& r) -> Result<Response> {
                 REEL_RETURN_IF_ERROR(Require(c, r.params.at("model"), Role::kReader));
                 return fn(reg, r);
               });
  };
  REEL_RETURN_IF_ERROR(
      add("GET", "/ui/api/models",
          [](const Caller& c, Registry& reg, const Request&) { return ListModels(c, reg); }));
  REEL_RETURN_IF_ERROR(
      add("GET", "/ui/api/models/{model}",
          [](const Caller& c, Registry& reg, const Request& r) -> Result<Response> {
            REEL_RETURN_IF_ERROR(Require(c, r.params.at("model"), Role::kReader));
            return ShowModel(c, reg, r.params.at("model"));
          }));
  REEL_RETURN_IF_ERROR(
      model_page("/ui/api/models/{model}/versions/{version}", [](Registry& reg, const Request& r) {
        return ShowVersion(reg, r.params.at("model"), r.params.at("version"));
      }));
  REEL_RETURN_IF_ERROR(model_page(
      "/ui/api/models/{model}/lineage",
      [](Registry& reg, const Request& r) { return Lineage(reg, r.params.at("model")); }));
  REEL_RETURN_IF_ERROR(add("GET", "/ui/api/diff", Diff));
  return add("PUT", "/ui/api/models/{model}/aliases/{alias}", MoveAlias);
}

}  // namespace reel::console
