// Who may do what in a registry served over HTTP (`reel registry serve`): users with API tokens
// and a role per registered model, kept in the registry's own database (registry_users,
// registry_grants). Only the SHA-256 of a token is stored; the token is shown once, when made.
//
// Roles, each including the one before: reader (list, show, pull, diff), writer (register, tag,
// branches, unprotected aliases), admin (protected aliases, removing versions). A grant names a
// model or "*" (every model, those not yet registered too); the higher of the two applies. A
// user made with `admin` is admin of every model and may also collect garbage and manage users.
//
// Errors: NotFound for an unknown user; AlreadyExists for a user that exists; InvalidArgument for
// a bad name or role; Unauthenticated (http::UnauthenticatedError) for a token nobody holds.
// Thread-safety: one database connection: use an AccessControl from one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "db/database.h"

namespace reel::registry {

enum class Role { kNone = 0, kReader = 1, kWriter = 2, kAdmin = 3 };

// "reader", "writer", "admin", "none"; InvalidArgument otherwise.
Result<Role> ParseRole(std::string_view name);
std::string_view RoleName(Role role);

struct Principal {
  std::string name;
  bool admin = false;                  // every model, and the registry itself
  std::map<std::string, Role> grants;  // by model, "*" for all

  Role RoleFor(const std::string& model) const;
};

struct UserInfo {
  std::string name, created_at;
  bool admin = false;
  std::map<std::string, Role> grants;
};

class AccessControl {
 public:
  // Opens the registry's database by its URI (a folder or postgresql://...) and brings its
  // schema up to date.
  static Result<std::unique_ptr<AccessControl>> Open(const std::string& registry_uri);
  explicit AccessControl(std::unique_ptr<db::Database> db) : db_(std::move(db)) {}

  // Makes a user and returns their new token (shown once: only its hash is kept).
  Result<std::string> AddUser(const std::string& name, bool admin);
  // A new token for an existing user; the old one stops working.
  Result<std::string> RotateToken(const std::string& name);
  Status RemoveUser(const std::string& name);
  // `model` is a model name or "*"; Role::kNone revokes.
  Status Grant(const std::string& user, const std::string& model, Role role);
  Result<std::vector<UserInfo>> ListUsers();

  // The token's holder. Errors: Unauthenticated when no user holds it.
  Result<Principal> Authenticate(std::string_view token);

 private:
  Result<std::map<std::string, Role>> Grants(const std::string& user);
  Status RequireUser(const std::string& name);

  std::unique_ptr<db::Database> db_;
};

// A new random token: "reel_" and 43 base64url characters (256 bits from the OS).
std::string NewToken();

}  // namespace reel::registry
