// What points at versions: branches (heads with a history), aliases (with an audit trail), tags;
// and removing a version, which must first account for all of them.
#include <string>

#include "registry/registry.h"
#include "registry/registry_impl.h"

namespace reel::registry {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Result<std::vector<BranchInfo>> LocalRegistry::ListBranches(const std::string& model) {
  REEL_RETURN_IF_ERROR(impl_->RequireModel(model));
  REEL_ASSIGN_OR_RETURN(auto rows, impl_->db().Query("SELECT name, head, updated_at FROM "
                                                     "registry_branches WHERE model = ? ORDER BY "
                                                     "name",
                                                     {model}));
  std::vector<BranchInfo> out;
  out.reserve(rows.size());
  for (const db::Row& r : rows) out.push_back({r.Text(0), r.Int(1), r.Text(2)});
  return out;
}

Status LocalRegistry::CreateBranch(const std::string& model, const std::string& branch,
                                   int64_t from, const Actor& who) {
  Impl& im = *impl_;
  REEL_RETURN_IF_ERROR(CheckName(branch, "branch"));
  return im.db().Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(im.RequireVersion({model, from}));
    if (im.BranchHead(model, branch).ok()) {
      return AlreadyExistsError("model '" + model + "' already has a branch '" + branch + "'");
    }
    return im.MoveBranch(model, branch, from, "create", who.name);
  });
}

Status LocalRegistry::DeleteBranch(const std::string& model, const std::string& branch,
                                   const Actor& who) {
  Impl& im = *impl_;
  if (branch == "main") {
    return FailedPreconditionError("model '" + model + "': branch main cannot be deleted");
  }
  return im.db().Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(im.RequireModel(model));
    REEL_RETURN_IF_ERROR(im.BranchHead(model, branch).status());
    REEL_RETURN_IF_ERROR(
        im.db()
            .Exec("DELETE FROM registry_branches WHERE model = ? AND name = ?", {model, branch})
            .status());
    return im.db()
        .Exec("DELETE FROM registry_branch_log WHERE model = ? AND branch = ?", {model, branch})
        .status();
  });
}

Result<std::vector<BranchEvent>> LocalRegistry::Log(const std::string& model,
                                                    const std::string& branch) {
  REEL_RETURN_IF_ERROR(impl_->RequireModel(model));
  REEL_RETURN_IF_ERROR(impl_->BranchHead(model, branch).status());
  REEL_ASSIGN_OR_RETURN(auto rows, impl_->db().Query("SELECT seq, version, action, by_user, at "
                                                     "FROM registry_branch_log WHERE model = ? "
                                                     "AND branch = ? ORDER BY seq DESC",
                                                     {model, branch}));
  std::vector<BranchEvent> out;
  out.reserve(rows.size());
  for (const db::Row& r : rows)
    out.push_back({r.Int(0), r.Int(1), r.Text(2), r.Text(3), r.Text(4)});
  return out;
}

Result<std::vector<AliasInfo>> LocalRegistry::ListAliases(const std::string& model) {
  REEL_RETURN_IF_ERROR(impl_->RequireModel(model));
  REEL_ASSIGN_OR_RETURN(auto rows, impl_->db().Query("SELECT name, version, protected, "
                                                     "updated_by, updated_at FROM "
                                                     "registry_aliases WHERE model = ? ORDER BY "
                                                     "name",
                                                     {model}));
  std::vector<AliasInfo> out;
  out.reserve(rows.size());
  for (const db::Row& r : rows) {
    out.push_back({r.Text(0), r.Int(1), r.Int(2) != 0, r.Text(3), r.Text(4)});
  }
  return out;
}

Status LocalRegistry::SetAlias(const std::string& model, const std::string& alias, int64_t version,
                               const Actor& who, std::optional<bool> protect) {
  Impl& im = *impl_;
  REEL_RETURN_IF_ERROR(CheckName(alias, "alias"));
  if (protect && !who.admin) {
    return PermissionDeniedError(who.name + " may not change the protection of alias '" + alias +
                                 "': admins only");
  }
  return im.db().Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(im.RequireVersion({model, version}));
    REEL_ASSIGN_OR_RETURN(auto rows, im.db().Query("SELECT version, protected FROM "
                                                   "registry_aliases WHERE model = ? AND name = ?",
                                                   {model, alias}));
    const bool was_protected = !rows.empty() && rows[0].Int(1) != 0;
    if (was_protected && !who.admin) {
      return PermissionDeniedError("alias '" + alias + "' of model '" + model +
                                   "' is protected: only an admin may move it");
    }
    const int64_t is_protected = protect.value_or(was_protected) ? 1 : 0;
    std::optional<int64_t> from;
    if (rows.empty()) {
      REEL_RETURN_IF_ERROR(im.db()
                               .Exec("INSERT INTO registry_aliases (model, name, version, "
                                     "protected, updated_by, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                                     {model, alias, version, is_protected, who.name, im.Now()})
                               .status());
    } else {
      from = rows[0].Int(0);
      REEL_RETURN_IF_ERROR(im.db()
                               .Exec("UPDATE registry_aliases SET version = ?, protected = ?, "
                                     "updated_by = ?, updated_at = ? WHERE model = ? AND name = ?",
                                     {version, is_protected, who.name, im.Now(), model, alias})
                               .status());
    }
    return im.LogAlias(model, alias, from, version, who.name);
  });
}

Status LocalRegistry::RemoveAlias(const std::string& model, const std::string& alias,
                                  const Actor& who) {
  Impl& im = *impl_;
  REEL_RETURN_IF_ERROR(CheckName(alias, "alias"));
  return im.db().Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(im.RequireModel(model));
    REEL_ASSIGN_OR_RETURN(auto rows, im.db().Query("SELECT version, protected FROM "
                                                   "registry_aliases WHERE model = ? AND name = ?",
                                                   {model, alias}));
    if (rows.empty()) return NotFoundError("model '" + model + "' has no alias '" + alias + "'");
    if (rows[0].Int(1) != 0 && !who.admin) {
      return PermissionDeniedError("alias '" + alias + "' of model '" + model +
                                   "' is protected: only an admin may remove it");
    }
    REEL_RETURN_IF_ERROR(
        im.db()
            .Exec("DELETE FROM registry_aliases WHERE model = ? AND name = ?", {model, alias})
            .status());
    return im.LogAlias(model, alias, rows[0].Int(0), std::nullopt, who.name);
  });
}

Result<std::vector<AliasEvent>> LocalRegistry::AliasHistory(const std::string& model) {
  REEL_RETURN_IF_ERROR(impl_->RequireModel(model));
  REEL_ASSIGN_OR_RETURN(auto rows, impl_->db().Query("SELECT seq, alias, from_version, "
                                                     "to_version, by_user, at FROM "
                                                     "registry_alias_log WHERE model = ? ORDER "
                                                     "BY seq DESC",
                                                     {model}));
  std::vector<AliasEvent> out;
  out.reserve(rows.size());
  for (const db::Row& r : rows) {
    AliasEvent e{r.Int(0), r.Text(1), std::nullopt, std::nullopt, r.Text(4), r.Text(5)};
    if (!r.IsNull(2)) e.from = r.Int(2);
    if (!r.IsNull(3)) e.to = r.Int(3);
    out.push_back(std::move(e));
  }
  return out;
}

Status LocalRegistry::SetTag(const VersionId& id, const std::string& key,
                             const std::string& value) {
  Impl& im = *impl_;
  REEL_RETURN_IF_ERROR(CheckName(key, "tag"));
  return im.db().Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(im.RequireVersion(id));
    REEL_ASSIGN_OR_RETURN(int64_t changed,
                          im.db().Exec("UPDATE registry_tags SET value = ? WHERE model = ? AND "
                                       "version = ? AND tag = ?",
                                       {value, id.model, id.version, key}));
    if (changed > 0) return Status::Ok();
    return im.db()
        .Exec("INSERT INTO registry_tags (model, version, tag, value) VALUES (?, ?, ?, ?)",
              {id.model, id.version, key, value})
        .status();
  });
}

Status LocalRegistry::RemoveTag(const VersionId& id, const std::string& key) {
  Impl& im = *impl_;
  return im.db().Transact([&]() -> Status {
    REEL_RETURN_IF_ERROR(im.RequireVersion(id));
    REEL_ASSIGN_OR_RETURN(int64_t changed,
                          im.db().Exec("DELETE FROM registry_tags WHERE model = ? AND version = ? "
                                       "AND tag = ?",
                                       {id.model, id.version, key}));
    if (changed == 0) return NotFoundError(id.ToString() + " has no tag '" + key + "'");
    return Status::Ok();
  });
}

namespace {

// What refers to a version: "alias production", "branch main (head)", "models:/m/4 (child)".
Result<std::vector<std::string>> Referrers(db::Database& d, const VersionId& id) {
  std::vector<std::string> out;
  REEL_ASSIGN_OR_RETURN(auto aliases,
                        d.Query("SELECT name FROM registry_aliases WHERE model = ? AND version = ?",
                                {id.model, id.version}));
  out.reserve(aliases.size());
  for (const db::Row& r : aliases) out.push_back("alias " + r.Text(0));
  REEL_ASSIGN_OR_RETURN(auto heads,
                        d.Query("SELECT name FROM registry_branches WHERE model = ? AND head = ?",
                                {id.model, id.version}));
  for (const db::Row& r : heads) out.push_back("the head of branch " + r.Text(0));
  REEL_ASSIGN_OR_RETURN(auto children, d.Query("SELECT model, version FROM registry_parents "
                                               "WHERE parent_model = ? AND parent_version = ?",
                                               {id.model, id.version}));
  for (const db::Row& r : children) {
    out.push_back("child " + VersionUri(r.Text(0), r.Int(1)));
  }
  return out;
}

// A branch whose head is being removed steps back to the newest earlier head still alive; a
// branch with none left goes (main included: it comes back with the next registration).
Status StepBranchesBack(LocalRegistry::Impl& im, const VersionId& id, const std::string& by) {
  db::Database& d = im.db();
  REEL_ASSIGN_OR_RETURN(auto heads,
                        d.Query("SELECT name FROM registry_branches WHERE model = ? AND head = ?",
                                {id.model, id.version}));
  for (const db::Row& h : heads) {
    const std::string branch = h.Text(0);
    REEL_ASSIGN_OR_RETURN(
        auto back, d.Query("SELECT l.version FROM registry_branch_log l JOIN registry_versions v "
                           "ON v.model = l.model AND v.version = l.version WHERE l.model = ? AND "
                           "l.branch = ? AND l.version <> ? ORDER BY l.seq DESC LIMIT 1",
                           {id.model, branch, id.version}));
    if (back.empty()) {
      REEL_RETURN_IF_ERROR(
          d.Exec("DELETE FROM registry_branches WHERE model = ? AND name = ?", {id.model, branch})
              .status());
      REEL_RETURN_IF_ERROR(d.Exec("DELETE FROM registry_branch_log WHERE model = ? AND branch = ?",
                                  {id.model, branch})
                               .status());
      continue;
    }
    REEL_RETURN_IF_ERROR(im.MoveBranch(id.model, branch, back[0].Int(0), "step-back", by));
  }
  return Status::Ok();
}

}  // namespace

Status LocalRegistry::Remove(const VersionId& id, bool force, const Actor& who) {
  Impl& im = *impl_;
  return im.db().Transact([&]() -> Status {
    db::Database& d = im.db();
    REEL_RETURN_IF_ERROR(im.RequireVersion(id));
    REEL_ASSIGN_OR_RETURN(std::vector<std::string> refs, Referrers(d, id));
    if (!refs.empty() && !force) {
      return FailedPreconditionError(id.ToString() + " is still referred to by " + Join(refs) +
                                     " (--force removes it anyway)");
    }
    REEL_ASSIGN_OR_RETURN(auto aliases,
                          d.Query("SELECT name, protected FROM registry_aliases WHERE model = ? "
                                  "AND version = ?",
                                  {id.model, id.version}));
    for (const db::Row& a : aliases) {
      if (a.Int(1) != 0 && !who.admin) {
        return PermissionDeniedError("alias '" + a.Text(0) + "' protects " + id.ToString() +
                                     ": only an admin may remove it");
      }
      REEL_RETURN_IF_ERROR(
          d.Exec("DELETE FROM registry_aliases WHERE model = ? AND name = ?", {id.model, a.Text(0)})
              .status());
      REEL_RETURN_IF_ERROR(im.LogAlias(id.model, a.Text(0), id.version, std::nullopt, who.name));
    }
    for (const char* table :
         {"registry_tags", "registry_parents", "registry_version_documents", "registry_versions"}) {
      REEL_RETURN_IF_ERROR(
          d.Exec(std::string("DELETE FROM ") + table + " WHERE model = ? AND version = ?",
                 {id.model, id.version})
              .status());
    }
    return StepBranchesBack(im, id, who.name);
  });
}

}  // namespace reel::registry
