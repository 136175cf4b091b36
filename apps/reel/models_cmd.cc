// reel models register|ls|show|log|diff|merge|rebase|tag|alias|branch|export|rm|gc — the model
// registry from the command line, like `git` for model versions. The registry is --registry URI,
// else $REEL_REGISTRY_URI, else ./reel-data/registry (a folder: embedded SQLite and the weights).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "apps/reel/commands.h"
#include "apps/reel/models_print.h"
#include "base/build_info.h"
#include "base/progress.h"
#include "registry/diff.h"
#include "registry/merge.h"
#include "registry/registry.h"
#include "registry/views.h"
#include "train/registration.h"

namespace reel::cli {
namespace {

using registry::Actor;
using registry::Registry;
using registry::VersionId;
using registry::VersionInfo;

struct ModelsFlags {
  std::string registry = "reel-data/registry", chunks;
  bool json = false;
  // register
  std::string name, path, branch = "main", message, config;
  std::vector<std::string> parents, tags, set_aliases;
  bool with_optimizer = false, skip_unchanged = false;
  // the others
  std::string uri;                // show/export/rm/tag target
  std::vector<std::string> uris;  // diff's two
  std::string alias, target, from, dir;
  int64_t version = 0;
  bool protect = false, unprotect = false, force = false, dry_run = false;
  double grace_s = 3600;
  std::vector<std::string> remove_tags;
  // merge and rebase
  std::string strategy = "none", into, onto, old_base;
  double alpha = 0.5, scale = 1.0, density = 0.2;
};

constexpr std::string_view kModels = "reel models";  // the prefix of its error lines

Result<std::unique_ptr<Registry>> Open(const ModelsFlags& f) {
  return registry::OpenRegistry(f.registry, f.chunks);
}

// NAME/BRANCH or NAME (branch main).
std::pair<std::string, std::string> ModelAndBranch(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return {text, "main"};
  return {text.substr(0, slash), text.substr(slash + 1)};
}

int RunRegister(const ModelsFlags& f) {
  train::ImportOptions options{f.config, f.with_optimizer};
  Result<registry::NewVersion> nv = train::VersionFromPath(f.path, options);
  if (!nv.ok()) return Fail(kModels, nv.status());
  nv->model = f.name;
  nv->branch = f.branch;
  nv->message = f.message;
  Result<std::map<std::string, std::string>> tags = ParseKeyValues("tag", f.tags);
  if (!tags.ok()) return Fail(kModels, tags.status());
  nv->tags = *tags;
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  for (const std::string& uri : f.parents) {
    Result<VersionInfo> parent = (*reg)->Get(uri);
    if (!parent.ok()) return Fail(kModels, parent.status());
    nv->parents.push_back(parent->id);
  }
  nv->reuse_identical_head = f.skip_unchanged;
  registry::PushStats stats;
  bool reused = false;
  Result<VersionInfo> v = (*reg)->Register(*nv, Actor::Local(), &stats, &reused);
  if (!v.ok()) return Fail(kModels, v.status());
  for (const std::string& alias : f.set_aliases) {
    Status s = (*reg)->SetAlias(v->id.model, alias, v->id.version, Actor::Local());
    if (!s.ok()) return Fail(kModels, s);
  }
  if (f.json) return PrintJson(registry::VersionJson(*v));
  if (reused) {
    std::printf("unchanged: %s on branch %s already holds these weights\n",
                v->id.ToString().c_str(), v->branch.c_str());
  } else {
    PrintRegistered(*v, stats);
  }
  for (const std::string& alias : f.set_aliases) {
    std::printf("models:/%s@%s -> %s\n", v->id.model.c_str(), alias.c_str(),
                v->id.ToString().c_str());
  }
  return 0;
}

int RunList(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  if (f.name.empty()) {
    auto models = (*reg)->ListModels();
    if (!models.ok()) return Fail(kModels, models.status());
    return f.json ? PrintJson(ModelsJson(*models)) : (PrintModels(*models), 0);
  }
  auto versions = (*reg)->ListVersions(f.name);
  if (!versions.ok()) return Fail(kModels, versions.status());
  auto aliases = (*reg)->ListAliases(f.name);
  if (!aliases.ok()) return Fail(kModels, aliases.status());
  return f.json ? PrintJson(VersionsJson(*versions)) : (PrintVersions(*versions, *aliases), 0);
}

int RunShow(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> v = (*reg)->Get(f.uri);
  if (!v.ok()) return Fail(kModels, v.status());
  auto aliases = (*reg)->ListAliases(v->id.model);
  if (!aliases.ok()) return Fail(kModels, aliases.status());
  return f.json ? PrintJson(registry::VersionJson(*v)) : (PrintVersion(*v, *aliases), 0);
}

int RunLog(const ModelsFlags& f) {
  auto [model, branch] = ModelAndBranch(f.name);
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  auto log = (*reg)->Log(model, branch);
  if (!log.ok()) return Fail(kModels, log.status());
  std::vector<VersionInfo> versions;
  for (const registry::BranchEvent& e : *log) {
    Result<VersionInfo> v = (*reg)->Get(VersionId{model, e.version});
    if (v.ok()) versions.push_back(*v);  // removed since: the event still shows
  }
  return f.json ? PrintJson(LogJson(*log)) : (PrintLog(model, branch, *log, versions), 0);
}

int RunDiff(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> a = (*reg)->Get(f.uris.at(0));
  if (!a.ok()) return Fail(kModels, a.status());
  Result<VersionInfo> b = (*reg)->Get(f.uris.at(1));
  if (!b.ok()) return Fail(kModels, b.status());
  Result<registry::VersionDiff> d = registry::DiffVersions(**reg, *a, *b);
  if (!d.ok()) return Fail(kModels, d.status());
  return f.json ? PrintJson(d->ToJson()) : (PrintDiff(*d), 0);
}

// Registers a merge's or rebase's weights on --into NAME/BRANCH, else on `home`'s branch.
int RegisterCombined(Registry& reg, const ModelsFlags& f, const VersionInfo& home,
                     registry::MergeOutcome outcome, std::vector<VersionId> parents,
                     const std::string& message) {
  registry::NewVersion nv;
  nv.model = home.id.model;
  nv.branch = home.branch;
  if (!f.into.empty()) std::tie(nv.model, nv.branch) = ModelAndBranch(f.into);
  nv.weights = std::move(outcome.weights);
  nv.architecture = home.architecture;
  nv.config = home.config;
  nv.dataset_uri = home.dataset_uri;
  nv.dataset_hash = home.dataset_hash;
  nv.parents = std::move(parents);
  nv.recipe = outcome.recipe;
  nv.message = f.message.empty() ? message : f.message;
  const BuildInfo& build = GetBuildInfo();
  nv.code_commit = build.git_commit;
  nv.code_dirty = build.git_dirty;
  registry::PushStats stats;
  Result<VersionInfo> v = reg.Register(nv, Actor::Local(), &stats);
  if (!v.ok()) return Fail(kModels, v.status());
  if (f.json) return PrintJson(registry::VersionJson(*v));
  PrintRegistered(*v, stats);
  std::printf("recipe: %s\n", v->recipe.dump().c_str());
  return 0;
}

int RunMerge(const ModelsFlags& f) {
  Result<registry::MergeStrategy> strategy = registry::ParseMergeStrategy(f.strategy);
  if (!strategy.ok()) return Fail(kModels, strategy.status());
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> ours = (*reg)->Get(f.uris.at(0));
  if (!ours.ok()) return Fail(kModels, ours.status());
  Result<VersionInfo> theirs = (*reg)->Get(f.uris.at(1));
  if (!theirs.ok()) return Fail(kModels, theirs.status());
  registry::MergeOptions options{*strategy, f.alpha, f.scale, f.density};
  Result<registry::MergeOutcome> m = registry::MergeVersions(**reg, *ours, *theirs, options);
  if (!m.ok()) return Fail(kModels, m.status());
  const std::string message =
      "merge " + ours->id.ToString() + " and " + theirs->id.ToString() + " (" + f.strategy + ")";
  return RegisterCombined(**reg, f, *ours, std::move(*m), {ours->id, theirs->id}, message);
}

// --from, else the common ancestor of the tip and the new base.
Result<VersionInfo> OldBase(Registry& reg, const ModelsFlags& f, const VersionInfo& tip,
                            const VersionInfo& onto) {
  if (!f.old_base.empty()) return reg.Get(f.old_base);
  REEL_ASSIGN_OR_RETURN(std::optional<VersionId> lca,
                        registry::LowestCommonAncestor(reg, tip.id, onto.id));
  if (!lca) {
    return InvalidArgumentError(tip.id.ToString() + " and " + onto.id.ToString() +
                                " share no ancestor: give --from OLD_BASE");
  }
  return reg.Get(*lca);
}

int RunRebase(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> tip = (*reg)->Get(f.uri);
  if (!tip.ok()) return Fail(kModels, tip.status());
  Result<VersionInfo> onto = (*reg)->Get(f.onto);
  if (!onto.ok()) return Fail(kModels, onto.status());
  Result<VersionInfo> old_base = OldBase(**reg, f, *tip, *onto);
  if (!old_base.ok()) return Fail(kModels, old_base.status());
  Result<registry::MergeOutcome> r = registry::RebaseVersion(**reg, *tip, *old_base, *onto);
  if (!r.ok()) return Fail(kModels, r.status());
  const std::string message = "rebase " + tip->id.ToString() + " from " + old_base->id.ToString() +
                              " onto " + onto->id.ToString();
  return RegisterCombined(**reg, f, *tip, std::move(*r), {onto->id, tip->id}, message);
}

int RunTag(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> v = (*reg)->Get(f.uri);
  if (!v.ok()) return Fail(kModels, v.status());
  Result<std::map<std::string, std::string>> tags = ParseKeyValues("tag", f.tags);
  if (!tags.ok()) return Fail(kModels, tags.status());
  for (const auto& [key, value] : *tags) {
    if (Status s = (*reg)->SetTag(v->id, key, value); !s.ok()) return Fail(kModels, s);
  }
  for (const std::string& key : f.remove_tags) {
    if (Status s = (*reg)->RemoveTag(v->id, key); !s.ok()) return Fail(kModels, s);
  }
  std::printf("%s: %zu tag(s) set, %zu removed\n", v->id.ToString().c_str(), tags->size(),
              f.remove_tags.size());
  return 0;
}

int RunAliasSet(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  std::optional<bool> protect;
  if (f.protect || f.unprotect) protect = f.protect;
  Status s = (*reg)->SetAlias(f.name, f.alias, f.version, Actor::Local(), protect);
  if (!s.ok()) return Fail(kModels, s);
  std::printf("models:/%s@%s -> %s\n", f.name.c_str(), f.alias.c_str(),
              registry::VersionUri(f.name, f.version).c_str());
  return 0;
}

int RunAliasRemove(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  if (Status s = (*reg)->RemoveAlias(f.name, f.alias, Actor::Local()); !s.ok())
    return Fail(kModels, s);
  std::printf("removed models:/%s@%s\n", f.name.c_str(), f.alias.c_str());
  return 0;
}

int RunAliasList(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  auto aliases = (*reg)->ListAliases(f.name);
  if (!aliases.ok()) return Fail(kModels, aliases.status());
  auto history = (*reg)->AliasHistory(f.name);
  if (!history.ok()) return Fail(kModels, history.status());
  if (f.json) return PrintJson(AliasesJson(*aliases, *history));
  PrintAliases(f.name, *aliases, *history);
  return 0;
}

int RunBranchCreate(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  const std::string from = f.from.empty() ? "models:/" + f.name + "/branch/main" : f.from;
  Result<VersionInfo> v = (*reg)->Get(from);
  if (!v.ok()) return Fail(kModels, v.status());
  if (v->id.model != f.name) {
    return Fail(kModels, InvalidArgumentError("--from " + from + " is a version of another model"));
  }
  Status s = (*reg)->CreateBranch(f.name, f.target, v->id.version, Actor::Local());
  if (!s.ok()) return Fail(kModels, s);
  std::printf("branch %s of %s at version %lld\n", f.target.c_str(), f.name.c_str(),
              static_cast<long long>(v->id.version));
  return 0;
}

int RunBranchList(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  auto branches = (*reg)->ListBranches(f.name);
  if (!branches.ok()) return Fail(kModels, branches.status());
  return f.json ? PrintJson(BranchesJson(*branches)) : (PrintBranches(*branches), 0);
}

int RunBranchRemove(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  if (Status s = (*reg)->DeleteBranch(f.name, f.target, Actor::Local()); !s.ok())
    return Fail(kModels, s);
  std::printf("deleted branch %s of %s\n", f.target.c_str(), f.name.c_str());
  return 0;
}

int RunExport(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> v = (*reg)->Get(f.uri);
  if (!v.ok()) return Fail(kModels, v.status());
  Status s = ExportVersion(
      *v, f.dir, [&](storage::ObjectWriter& out) { return (*reg)->PullWeightsTo(*v, out); });
  if (!s.ok()) return Fail(kModels, s);
  std::printf("exported %s to %s (model.safetensors, config.yaml, version.json)\n",
              v->id.ToString().c_str(), f.dir.c_str());
  return 0;
}

int RunRemove(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  Result<VersionInfo> v = (*reg)->Get(f.uri);
  if (!v.ok()) return Fail(kModels, v.status());
  if (Status s = (*reg)->Remove(v->id, f.force, Actor::Local()); !s.ok()) return Fail(kModels, s);
  std::printf("removed %s\n", v->id.ToString().c_str());
  return 0;
}

int RunGc(const ModelsFlags& f) {
  auto reg = Open(f);
  if (!reg.ok()) return Fail(kModels, reg.status());
  registry::GcOptions options;
  options.grace_ms = static_cast<int64_t>(f.grace_s * 1000);
  options.dry_run = f.dry_run;
  Result<registry::GcStats> stats = (*reg)->CollectGarbage(options, Actor::Local());
  if (!stats.ok()) return Fail(kModels, stats.status());
  if (f.json) {
    return PrintJson({{"chunks_live", stats->chunks_live},
                      {"chunks_removed", stats->chunks_removed},
                      {"chunks_young", stats->chunks_young},
                      {"bytes_removed", stats->bytes_removed},
                      {"chunks_missing", stats->chunks_missing},
                      {"dry_run", f.dry_run}});
  }
  std::printf("%s %lld unreferenced chunks (%s); kept %lld live and %lld younger than %.0f s\n",
              f.dry_run ? "would remove" : "removed", static_cast<long long>(stats->chunks_removed),
              Progress::FormatBytes(static_cast<double>(stats->bytes_removed)).c_str(),
              static_cast<long long>(stats->chunks_live),
              static_cast<long long>(stats->chunks_young), f.grace_s);
  if (stats->chunks_missing > 0) {
    std::fprintf(stderr,
                 "reel models: warning: %lld chunks that versions name are missing from the "
                 "store; pulls of those versions fail with DataLoss\n",
                 static_cast<long long>(stats->chunks_missing));
  }
  return 0;
}

void AddRegister(CLI::App* models, ModelsFlags* f, int* exit_code) {
  CLI::App* c =
      models->add_subcommand("register", "register a run, checkpoint or safetensors file");
  c->add_option("name", f->name, "registered model name")->required();
  c->add_option("path", f->path, "run dir, checkpoint dir, or .safetensors file")->required();
  c->add_option("--branch", f->branch, "branch to register on (created when missing)");
  c->add_option("-m,--message", f->message, "what this version is");
  c->add_option("--config", f->config, "the config (model section) of a .safetensors file");
  c->add_option("--parent", f->parents, "parent version URI (lineage); repeatable");
  c->add_option("--tag", f->tags, "KEY=VALUE; repeatable");
  c->add_flag("--with-optimizer", f->with_optimizer, "keep the checkpoint's optimiser state");
  c->add_option("--alias", f->set_aliases, "point this alias at the new version; repeatable");
  c->add_flag("--skip-unchanged", f->skip_unchanged,
              "reuse the branch head when it holds the same weights");
  c->callback([f, exit_code] { *exit_code = RunRegister(*f); });
}

void AddReads(CLI::App* models, ModelsFlags* f, int* exit_code) {
  CLI::App* ls = models->add_subcommand("ls", "list models, or the versions of one");
  ls->add_option("name", f->name, "a model: list its versions");
  ls->callback([f, exit_code] { *exit_code = RunList(*f); });
  CLI::App* show = models->add_subcommand("show", "one version: lineage, config, metrics");
  show->add_option("uri", f->uri, "models:/NAME/N, models:/NAME@ALIAS, ...")->required();
  show->callback([f, exit_code] { *exit_code = RunShow(*f); });
  CLI::App* log = models->add_subcommand("log", "the history of a branch, with lineage");
  log->add_option("name", f->name, "NAME or NAME/BRANCH (default branch main)")->required();
  log->callback([f, exit_code] { *exit_code = RunLog(*f); });
  CLI::App* diff = models->add_subcommand("diff", "what changed between two versions");
  diff->add_option("uris", f->uris, "URI URI")->required()->expected(2);
  diff->callback([f, exit_code] { *exit_code = RunDiff(*f); });
}

void AddAliases(CLI::App* models, ModelsFlags* f, int* exit_code) {
  CLI::App* alias = models->add_subcommand("alias", "named pointers to versions");
  alias->require_subcommand(1);
  CLI::App* set = alias->add_subcommand("set", "point ALIAS at VERSION (atomically)");
  set->add_option("name", f->name)->required();
  set->add_option("alias", f->alias)->required();
  set->add_option("version", f->version)->required()->check(CLI::PositiveNumber);
  set->add_flag("--protect", f->protect, "only admins may move it from now on");
  set->add_flag("--unprotect", f->unprotect, "anyone with write access may move it");
  set->callback([f, exit_code] { *exit_code = RunAliasSet(*f); });
  CLI::App* rm = alias->add_subcommand("rm", "remove an alias");
  rm->add_option("name", f->name)->required();
  rm->add_option("alias", f->alias)->required();
  rm->callback([f, exit_code] { *exit_code = RunAliasRemove(*f); });
  CLI::App* ls = alias->add_subcommand("ls", "a model's aliases and their audit trail");
  ls->add_option("name", f->name)->required();
  ls->callback([f, exit_code] { *exit_code = RunAliasList(*f); });
}

void AddBranches(CLI::App* models, ModelsFlags* f, int* exit_code) {
  CLI::App* branch = models->add_subcommand("branch", "movable heads with a history");
  branch->require_subcommand(1);
  CLI::App* create = branch->add_subcommand("create", "a new branch at a version");
  create->add_option("name", f->name)->required();
  create->add_option("branch", f->target)->required();
  create->add_option("--from", f->from, "version URI (default: the head of main)");
  create->callback([f, exit_code] { *exit_code = RunBranchCreate(*f); });
  CLI::App* ls = branch->add_subcommand("ls", "a model's branches");
  ls->add_option("name", f->name)->required();
  ls->callback([f, exit_code] { *exit_code = RunBranchList(*f); });
  CLI::App* rm = branch->add_subcommand("rm", "delete a branch (its versions stay)");
  rm->add_option("name", f->name)->required();
  rm->add_option("branch", f->target)->required();
  rm->callback([f, exit_code] { *exit_code = RunBranchRemove(*f); });
}

void AddCombines(CLI::App* models, ModelsFlags* f, int* exit_code) {
  CLI::App* merge = models->add_subcommand("merge", "three-way merge of two versions");
  merge->add_option("uris", f->uris, "OURS THEIRS")->required()->expected(2);
  merge->add_option("--strategy", f->strategy,
                    "for tensors changed on both sides: none (refuse), ours, theirs, average, "
                    "task-arithmetic, ties");
  merge->add_option("--alpha", f->alpha, "average: the weight of THEIRS (default 0.5)");
  merge->add_option("--scale", f->scale, "task-arithmetic, ties: the scale of the change");
  merge->add_option("--density", f->density, "ties: the fraction of each change kept");
  merge->add_option("--into", f->into, "NAME/BRANCH to register on (default: OURS' branch)");
  merge->add_option("-m,--message", f->message, "what this merge is");
  merge->callback([f, exit_code] { *exit_code = RunMerge(*f); });
  CLI::App* rebase = models->add_subcommand("rebase", "replay a version's change onto a new base");
  rebase->add_option("uri", f->uri, "the tip to replay")->required();
  rebase->add_option("--onto", f->onto, "the new base")->required();
  rebase->add_option("--from", f->old_base, "the old base (default: the common ancestor)");
  rebase->add_option("--into", f->into, "NAME/BRANCH to register on (default: the tip's)");
  rebase->add_option("-m,--message", f->message, "what this rebase is");
  rebase->callback([f, exit_code] { *exit_code = RunRebase(*f); });
}

void AddChanges(CLI::App* models, ModelsFlags* f, int* exit_code) {
  CLI::App* tag = models->add_subcommand("tag", "set or remove tags of a version");
  tag->add_option("uri", f->uri)->required();
  tag->add_option("tags", f->tags, "KEY=VALUE ...");
  tag->add_option("--rm", f->remove_tags, "tag keys to remove");
  tag->callback([f, exit_code] { *exit_code = RunTag(*f); });
  CLI::App* ex = models->add_subcommand("export", "write a version as safetensors + config");
  ex->add_option("uri", f->uri)->required();
  ex->add_option("dir", f->dir, "folder to write (must not hold an export already)")->required();
  ex->callback([f, exit_code] { *exit_code = RunExport(*f); });
  CLI::App* rm = models->add_subcommand("rm", "remove a version");
  rm->add_option("uri", f->uri)->required();
  rm->add_flag("--force", f->force, "even when aliases, branches or children refer to it");
  rm->callback([f, exit_code] { *exit_code = RunRemove(*f); });
  CLI::App* gc = models->add_subcommand("gc", "remove weight chunks no version needs");
  gc->add_option("--grace", f->grace_s,
                 "keep unreferenced chunks younger than this many seconds: a push may still be "
                 "writing them (default 3600)")
      ->check(CLI::NonNegativeNumber);
  gc->add_flag("--dry-run", f->dry_run, "count what would go, remove nothing");
  gc->callback([f, exit_code] { *exit_code = RunGc(*f); });
}

}  // namespace

void RegisterModels(CLI::App& app, int* exit_code) {
  static ModelsFlags flags;
  CLI::App* models =
      app.add_subcommand("models", "the model registry: versions, branches, aliases");
  models->require_subcommand(1);
  // `reel models ls --json` as well as `reel models --json ls`: the subcommands (which inherit
  // this) pass the options they do not know up to here.
  models->fallthrough();
  models
      ->add_option("--registry", flags.registry,
                   "folder, postgresql://... (with --chunks), or http://host:port of a "
                   "`reel registry serve` (token in $REEL_REGISTRY_TOKEN)")
      ->envname("REEL_REGISTRY_URI");
  models->add_option("--chunks", flags.chunks, "store URI of the weights of a PostgreSQL registry")
      ->envname("REEL_REGISTRY_CHUNKS");
  models->add_flag("--json", flags.json, "print JSON instead of tables");
  AddRegister(models, &flags, exit_code);
  AddReads(models, &flags, exit_code);
  AddAliases(models, &flags, exit_code);
  AddBranches(models, &flags, exit_code);
  AddChanges(models, &flags, exit_code);
  AddCombines(models, &flags, exit_code);
}

}  // namespace reel::cli
