// reel registry serve|user|grant — a team's registry server, and who may use it.
//
//   reel registry serve [--registry URI] [--host H] [--port N] [--no-auth]
//   reel registry user add NAME [--admin]     prints the new user's token (shown once)
//   reel registry user token NAME             a new token; the old one stops working
//   reel registry user rm NAME | user ls
//   reel registry grant USER MODEL|'*' reader|writer|admin|none
//
// `serve` prints "listening on http://ADDRESS" as its first line (with --port 0, the port it
// picked), serves until SIGINT or SIGTERM, then lets requests in flight finish.
#include <cstdio>
#include <memory>
#include <string>

#include "apps/reel/commands.h"
#include "apps/reel/models_print.h"
#include "apps/reel/stop_signals.h"
#include "http/server.h"
#include "registry/access.h"
#include "registry/service.h"
#include "registry/views.h"

namespace reel::cli {
namespace {

struct RegistryFlags {
  std::string registry, chunks;
  std::string host = "127.0.0.1";
  int port = 8600, threads = 4;
  double max_body_mb = 8192;
  bool no_auth = false, admin = false, json = false;
  std::string user, model, role;
};

constexpr std::string_view kRegistry = "reel registry";  // the prefix of its error lines

int RunServe(const RegistryFlags& f) {
  const sigset_t stop = BlockStopSignals();
  registry::ServiceOptions options;
  options.registry_uri = registry::RegistryUriOrDefault(f.registry);
  options.chunks = f.chunks;
  options.no_auth = f.no_auth;
  options.pool = f.threads;
  if (options.registry_uri.rfind("http", 0) == 0) {
    return Fail(kRegistry,
                InvalidArgumentError("--registry " + options.registry_uri +
                                     ": serve a folder or postgresql:// registry, not a server"));
  }
  Result<std::unique_ptr<registry::RegistryService>> service =
      registry::RegistryService::Open(options);
  if (!service.ok()) return Fail(kRegistry, service.status());
  http::Router router;
  if (Status s = (*service)->AddRoutes(&router); !s.ok()) return Fail(kRegistry, s);
  http::ServerOptions server_options;
  server_options.host = f.host;
  server_options.port = f.port;
  server_options.threads = f.threads;
  server_options.max_body_bytes = static_cast<uint64_t>(f.max_body_mb * (1 << 20));
  Result<std::unique_ptr<http::Server>> server =
      http::Server::Start(server_options, std::move(router));
  if (!server.ok()) return Fail(kRegistry, server.status());
  std::printf("listening on %s\n", (*server)->url().c_str());
  std::printf("registry %s, %s\n", options.registry_uri.c_str(),
              f.no_auth ? "no auth: every caller is an admin" : "bearer tokens required");
  std::fflush(stdout);
  std::fprintf(stderr, "reel registry: %s, stopping\n", WaitForStopSignal(stop));
  (*server)->Shutdown();
  return 0;
}

Result<std::unique_ptr<registry::AccessControl>> OpenAccess(const RegistryFlags& f) {
  const std::string uri = registry::RegistryUriOrDefault(f.registry);
  if (uri.rfind("http", 0) == 0) {
    return InvalidArgumentError("--registry " + uri +
                                ": users are managed on the server's own folder or database");
  }
  return registry::AccessControl::Open(uri);
}

int RunUserAdd(const RegistryFlags& f) {
  auto access = OpenAccess(f);
  if (!access.ok()) return Fail(kRegistry, access.status());
  Result<std::string> token = (*access)->AddUser(f.user, f.admin);
  if (!token.ok()) return Fail(kRegistry, token.status());
  std::printf("%s\n", token->c_str());
  std::fprintf(stderr, "user '%s' made%s; the token above is shown once: keep it\n", f.user.c_str(),
               f.admin ? " (admin)" : "");
  return 0;
}

int RunUserToken(const RegistryFlags& f) {
  auto access = OpenAccess(f);
  if (!access.ok()) return Fail(kRegistry, access.status());
  Result<std::string> token = (*access)->RotateToken(f.user);
  if (!token.ok()) return Fail(kRegistry, token.status());
  std::printf("%s\n", token->c_str());
  return 0;
}

int RunUserRemove(const RegistryFlags& f) {
  auto access = OpenAccess(f);
  if (!access.ok()) return Fail(kRegistry, access.status());
  if (Status s = (*access)->RemoveUser(f.user); !s.ok()) return Fail(kRegistry, s);
  std::printf("removed user %s\n", f.user.c_str());
  return 0;
}

int RunUserList(const RegistryFlags& f) {
  auto access = OpenAccess(f);
  if (!access.ok()) return Fail(kRegistry, access.status());
  Result<std::vector<registry::UserInfo>> users = (*access)->ListUsers();
  if (!users.ok()) return Fail(kRegistry, users.status());
  nlohmann::json out = nlohmann::json::array();
  for (const registry::UserInfo& u : *users) {
    nlohmann::json grants = nlohmann::json::object();
    std::string text;
    for (const auto& [model, role] : u.grants) {
      grants[model] = registry::RoleName(role);
      text += (text.empty() ? "" : ", ") + model + ":" + std::string(registry::RoleName(role));
    }
    out.push_back(
        {{"name", u.name}, {"admin", u.admin}, {"created_at", u.created_at}, {"grants", grants}});
    if (!f.json) {
      std::printf("%-20s %-6s %s\n", u.name.c_str(), u.admin ? "admin" : "", text.c_str());
    }
  }
  return f.json ? PrintJson(out) : 0;
}

int RunGrant(const RegistryFlags& f) {
  Result<registry::Role> role = registry::ParseRole(f.role);
  if (!role.ok()) return Fail(kRegistry, role.status());
  auto access = OpenAccess(f);
  if (!access.ok()) return Fail(kRegistry, access.status());
  if (Status s = (*access)->Grant(f.user, f.model, *role); !s.ok()) return Fail(kRegistry, s);
  std::printf("%s is %s of %s\n", f.user.c_str(), f.role.c_str(),
              f.model == "*" ? "every model" : ("model " + f.model).c_str());
  return 0;
}

void AddServe(CLI::App* reg, RegistryFlags* f, int* exit_code) {
  CLI::App* serve = reg->add_subcommand("serve", "serve the registry's HTTP API");
  serve->add_option("--host", f->host, "address to listen on (default 127.0.0.1)");
  serve->add_option("--port", f->port, "port (default 8600; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  serve->add_option("--threads", f->threads, "io threads and open connections (default 4)")
      ->check(CLI::Range(1, 256));
  serve->add_option("--max-body-mb", f->max_body_mb, "largest upload (default 8192)")
      ->check(CLI::PositiveNumber);
  serve->add_flag("--no-auth", f->no_auth,
                  "no tokens: every caller is an admin (for one person's local use)");
  serve->callback([f, exit_code] { *exit_code = RunServe(*f); });
}

void AddUsers(CLI::App* reg, RegistryFlags* f, int* exit_code) {
  CLI::App* user = reg->add_subcommand("user", "the server's users and their tokens");
  user->require_subcommand(1);
  CLI::App* add = user->add_subcommand("add", "make a user; prints their token once");
  add->add_option("name", f->user)->required();
  add->add_flag("--admin", f->admin, "admin of every model and of the registry");
  add->callback([f, exit_code] { *exit_code = RunUserAdd(*f); });
  CLI::App* token = user->add_subcommand("token", "a new token for a user (the old one ends)");
  token->add_option("name", f->user)->required();
  token->callback([f, exit_code] { *exit_code = RunUserToken(*f); });
  CLI::App* rm = user->add_subcommand("rm", "remove a user and their grants");
  rm->add_option("name", f->user)->required();
  rm->callback([f, exit_code] { *exit_code = RunUserRemove(*f); });
  CLI::App* ls = user->add_subcommand("ls", "users, and their roles per model");
  ls->callback([f, exit_code] { *exit_code = RunUserList(*f); });
  CLI::App* grant = reg->add_subcommand("grant", "give a user a role on a model ('*': all)");
  grant->add_option("user", f->user)->required();
  grant->add_option("model", f->model, "a model name, or '*' for every model")->required();
  grant->add_option("role", f->role, "reader, writer, admin, or none (revoke)")->required();
  grant->callback([f, exit_code] { *exit_code = RunGrant(*f); });
}

}  // namespace

void RegisterRegistry(CLI::App& app, int* exit_code) {
  static RegistryFlags flags;
  CLI::App* reg = app.add_subcommand("registry", "serve the model registry over HTTP; its users");
  reg->require_subcommand(1);
  reg->fallthrough();
  reg->add_option("--registry", flags.registry, "folder, or postgresql://... (with --chunks)")
      ->envname("REEL_REGISTRY_URI");
  reg->add_option("--chunks", flags.chunks, "store URI of the weights of a PostgreSQL registry")
      ->envname("REEL_REGISTRY_CHUNKS");
  reg->add_flag("--json", flags.json, "print JSON instead of tables");
  AddServe(reg, &flags, exit_code);
  AddUsers(reg, &flags, exit_code);
}

}  // namespace reel::cli
