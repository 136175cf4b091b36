#include "registry/access.h"

#include <openssl/rand.h>

#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "base/clock.h"
#include "base/hash.h"
#include "http/auth.h"
#include "http/message.h"
#include "registry/model_uri.h"
#include "registry/registry_impl.h"

namespace reel::registry {
namespace {

Status CheckGrantTarget(const std::string& model) {
  return model == "*" ? Status::Ok() : CheckName(model, "model name");
}

}  // namespace

Result<Role> ParseRole(std::string_view name) {
  if (name == "reader") return Role::kReader;
  if (name == "writer") return Role::kWriter;
  if (name == "admin") return Role::kAdmin;
  if (name == "none") return Role::kNone;
  return InvalidArgumentError("role '" + std::string(name) +
                              "': expected reader, writer, admin or none");
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kWriter:
      return "writer";
    case Role::kAdmin:
      return "admin";
    case Role::kNone:
      break;
  }
  return "none";
}

Role Principal::RoleFor(const std::string& model) const {
  if (admin) return Role::kAdmin;
  Role role = Role::kNone;
  for (const std::string& key : {std::string("*"), model}) {
    if (auto it = grants.find(key); it != grants.end()) role = std::max(role, it->second);
  }
  return role;
}

std::string NewToken() {
  unsigned char bytes[32];
  REEL_CHECK(RAND_bytes(bytes, sizeof(bytes)) == 1) << "the OS gave no random bytes";
  std::string text = Base64Encode(std::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  // base64url without padding, so a token is safe in headers, URLs and shell words.
  std::replace(text.begin(), text.end(), '+', '-');
  std::replace(text.begin(), text.end(), '/', '_');
  text.erase(std::remove(text.begin(), text.end(), '='), text.end());
  return "reel_" + text;
}

Result<std::unique_ptr<AccessControl>> AccessControl::Open(const std::string& registry_uri) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<db::Database> db, OpenRegistryDatabase(registry_uri));
  return std::make_unique<AccessControl>(std::move(db));
}

Status AccessControl::RequireUser(const std::string& name) {
  REEL_ASSIGN_OR_RETURN(auto rows,
                        db_->Query("SELECT name FROM registry_users WHERE name = ?", {name}));
  if (rows.empty()) return NotFoundError("registry: no user '" + name + "'");
  return Status::Ok();
}

Result<std::string> AccessControl::AddUser(const std::string& name, bool admin) {
  REEL_RETURN_IF_ERROR(CheckName(name, "user name"));
  std::string token = NewToken();
  Status s = db_->Exec(
                    "INSERT INTO registry_users (name, token_hash, admin, created_at) VALUES "
                    "(?, ?, ?, ?)",
                    {name, http::HashToken(token), int64_t{admin ? 1 : 0},
                     FormatIso8601Utc(std::chrono::system_clock::now())})
                 .status();
  if (s.code() == StatusCode::kAlreadyExists) {
    return AlreadyExistsError("registry: user '" + name + "' exists (rotate its token instead)");
  }
  REEL_RETURN_IF_ERROR(s);
  return token;
}

Result<std::string> AccessControl::RotateToken(const std::string& name) {
  REEL_RETURN_IF_ERROR(RequireUser(name));
  std::string token = NewToken();
  REEL_RETURN_IF_ERROR(db_->Exec("UPDATE registry_users SET token_hash = ? WHERE name = ?",
                                 {http::HashToken(token), name})
                           .status());
  return token;
}

Status AccessControl::RemoveUser(const std::string& name) {
  return db_->Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(RequireUser(name));
    REEL_RETURN_IF_ERROR(
        db_->Exec("DELETE FROM registry_grants WHERE user_name = ?", {name}).status());
    return db_->Exec("DELETE FROM registry_users WHERE name = ?", {name}).status();
  });
}

Status AccessControl::Grant(const std::string& user, const std::string& model, Role role) {
  REEL_RETURN_IF_ERROR(CheckGrantTarget(model));
  return db_->Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(RequireUser(user));
    REEL_RETURN_IF_ERROR(
        db_->Exec("DELETE FROM registry_grants WHERE user_name = ? AND model = ?", {user, model})
            .status());
    if (role == Role::kNone) return Status::Ok();
    return db_
        ->Exec("INSERT INTO registry_grants (user_name, model, role) VALUES (?, ?, ?)",
               {user, model, std::string(RoleName(role))})
        .status();
  });
}

Result<std::map<std::string, Role>> AccessControl::Grants(const std::string& user) {
  REEL_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT model, role FROM registry_grants WHERE "
                                              "user_name = ? ORDER BY model",
                                              {user}));
  std::map<std::string, Role> grants;
  for (const db::Row& r : rows) {
    Result<Role> role = ParseRole(r.Text(1));
    if (!role.ok()) return DataLossError("registry_grants of '" + user + "': " + r.Text(1));
    grants[r.Text(0)] = *role;
  }
  return grants;
}

Result<std::vector<UserInfo>> AccessControl::ListUsers() {
  REEL_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT name, admin, created_at FROM registry_users ORDER BY name"));
  std::vector<UserInfo> users;
  for (const db::Row& r : rows) {
    UserInfo u{r.Text(0), r.Text(2), r.Int(1) != 0, {}};
    REEL_ASSIGN_OR_RETURN(u.grants, Grants(u.name));
    users.push_back(std::move(u));
  }
  return users;
}

Result<Principal> AccessControl::Authenticate(std::string_view token) {
  // Looked up by the token's SHA-256: the lookup's time tells nothing about the token itself.
  REEL_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT name, admin FROM registry_users WHERE "
                                              "token_hash = ?",
                                              {http::HashToken(token)}));
  if (rows.empty()) return http::UnauthenticatedError("registry: the token is not valid");
  Principal p{rows[0].Text(0), rows[0].Int(1) != 0, {}};
  REEL_ASSIGN_OR_RETURN(p.grants, Grants(p.name));
  return p;
}

}  // namespace reel::registry
