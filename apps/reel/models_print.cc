#include "apps/reel/models_print.h"

#include <cstdio>

#include "base/progress.h"
#include "registry/views.h"
#include "storage/local_store.h"

namespace reel::cli {
namespace {

using registry::VersionInfo;

std::string Bytes(uint64_t n) { return Progress::FormatBytes(static_cast<double>(n)); }

std::string Metric(const nlohmann::json& metrics, const char* key) {
  auto it = metrics.find(key);
  if (it == metrics.end() || !it->is_number()) return "-";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.3f", it->get<double>());
  return buf;
}

std::string AliasesOf(int64_t version, const std::vector<registry::AliasInfo>& aliases) {
  std::string out;
  for (const auto& a : aliases) {
    if (a.version == version) out += (out.empty() ? "@" : " @") + a.name;
  }
  return out;
}

std::string Parents(const VersionInfo& v) {
  std::string out;
  for (const auto& p : v.parents) out += (out.empty() ? "" : ", ") + p.ToString();
  return out.empty() ? "-" : out;
}

std::string OrNone(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("-");
}

// A config `reel eval` can read: the version's own, else the model section alone.
std::string ExportConfig(const VersionInfo& v) {
  if (!v.config.empty()) return v.config;
  std::string yaml = "model:\n";
  for (const auto& [key, value] : v.architecture.items()) {
    yaml +=
        "  " + key + ": " + (value.is_string() ? value.get<std::string>() : value.dump()) + "\n";
  }
  return yaml;
}

}  // namespace

int PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

nlohmann::json ModelsJson(const std::vector<registry::ModelSummary>& models) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : models) out.push_back(registry::ModelJson(m));
  return out;
}

nlohmann::json VersionsJson(const std::vector<VersionInfo>& versions) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : versions) {
    out.push_back(registry::VersionJson(v, registry::VersionView::kListed));
  }
  return out;
}

nlohmann::json LogJson(const std::vector<registry::BranchEvent>& log) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : log) out.push_back(registry::BranchEventJson(e));
  return out;
}

nlohmann::json BranchesJson(const std::vector<registry::BranchInfo>& branches) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& b : branches) out.push_back(registry::BranchJson(b));
  return out;
}

nlohmann::json AliasesJson(const std::vector<registry::AliasInfo>& aliases,
                           const std::vector<registry::AliasEvent>& history) {
  nlohmann::json a = nlohmann::json::array(), h = nlohmann::json::array();
  for (const auto& x : aliases) a.push_back(registry::AliasJson(x));
  for (const auto& e : history) h.push_back(registry::AliasEventJson(e));
  return {{"aliases", a}, {"history", h}};
}

void PrintRegistered(const VersionInfo& v, const registry::PushStats& stats) {
  std::printf(
      "registered %s on branch %s: %d tensors, %s; stored %s new (%d of %d chunks, %d as "
      "deltas)",
      v.id.ToString().c_str(), v.branch.c_str(), static_cast<int>(v.weights.tensors.size()),
      Bytes(v.weight_bytes).c_str(), Bytes(stats.stored_bytes).c_str(), stats.chunks_written,
      stats.chunks, stats.deltas_written);
  if (stats.uploaded_bytes > 0) {  // through a server: what went over the network
    std::printf("; sent %d chunks, %s", stats.chunks_uploaded, Bytes(stats.uploaded_bytes).c_str());
  }
  std::printf("\n");
}

void PrintModels(const std::vector<registry::ModelSummary>& models) {
  if (models.empty()) {
    std::printf("no registered models (reel models register NAME PATH adds one)\n");
    return;
  }
  std::printf("%-32s %8s %8s  %-24s %s\n", "MODEL", "VERSIONS", "LATEST", "CREATED", "BY");
  for (const auto& m : models) {
    std::printf("%-32s %8lld %8lld  %-24s %s\n", m.name.c_str(), static_cast<long long>(m.versions),
                static_cast<long long>(m.latest), m.created_at.c_str(), m.created_by.c_str());
  }
}

void PrintVersions(const std::vector<VersionInfo>& versions,
                   const std::vector<registry::AliasInfo>& aliases) {
  std::printf("%7s  %-16s %-24s %-10s %6s %10s  %s\n", "VERSION", "BRANCH", "CREATED", "BY", "TOP1",
              "SIZE", "ALIASES / MESSAGE");
  for (const auto& v : versions) {
    const std::string tail = AliasesOf(v.id.version, aliases);
    std::printf("%7lld  %-16s %-24s %-10s %6s %10s  %s%s%s\n", static_cast<long long>(v.id.version),
                v.branch.c_str(), v.created_at.c_str(), v.author.c_str(),
                Metric(v.metrics, "top1").c_str(), Bytes(v.weight_bytes).c_str(), tail.c_str(),
                tail.empty() ? "" : " ", v.message.c_str());
  }
}

void PrintVersion(const VersionInfo& v, const std::vector<registry::AliasInfo>& aliases) {
  std::printf("%s\n", v.id.ToString().c_str());
  std::printf("  branch        %s\n", v.branch.c_str());
  const std::string a = AliasesOf(v.id.version, aliases);
  std::printf("  aliases       %s\n", a.empty() ? "-" : a.c_str());
  std::printf("  parents       %s\n", Parents(v).c_str());
  std::printf("  author        %s at %s\n", v.author.c_str(), v.created_at.c_str());
  std::printf("  message       %s\n", v.message.empty() ? "-" : v.message.c_str());
  std::printf("  architecture  %s\n", v.architecture.dump().c_str());
  std::printf("  weights       %zu tensors, %s (this version stored %s)\n",
              v.weights.tensors.size(), Bytes(v.weight_bytes).c_str(),
              Bytes(v.stored_bytes).c_str());
  std::printf("  optimiser     %s\n", v.optimizer ? "kept" : "-");
  std::printf("  dataset       %s%s%s\n", v.dataset_uri.empty() ? "-" : v.dataset_uri.c_str(),
              v.dataset_hash.empty() ? "" : " sha256:", v.dataset_hash.substr(0, 12).c_str());
  std::printf("  code          %s%s\n", v.code_commit.empty() ? "-" : v.code_commit.c_str(),
              v.code_dirty ? " (with uncommitted changes)" : "");
  std::printf("  metrics       top1 %s  top5 %s  video top1 %s\n",
              Metric(v.metrics, "top1").c_str(), Metric(v.metrics, "top5").c_str(),
              Metric(v.metrics, "video_top1").c_str());
  for (const auto& [key, value] : v.tags)
    std::printf("  tag           %s=%s\n", key.c_str(), value.c_str());
  std::printf("  recipe        %s\n", v.recipe.dump().c_str());
}

void PrintLog(const std::string& model, const std::string& branch,
              const std::vector<registry::BranchEvent>& log,
              const std::vector<VersionInfo>& versions) {
  std::printf("branch %s of %s, newest first\n", branch.c_str(), model.c_str());
  for (const auto& e : log) {
    const VersionInfo* v = nullptr;
    for (const auto& x : versions) {
      if (x.id.version == e.version) v = &x;
    }
    std::printf("  %-24s %-10s %-9s %s  parents %s  %s\n", e.at.c_str(), e.by.c_str(),
                e.action.c_str(), registry::VersionUri(model, e.version).c_str(),
                v ? Parents(*v).c_str() : "(removed)", v ? v->message.c_str() : "");
  }
}

void PrintDiff(const registry::VersionDiff& d) {
  std::printf("%s -> %s\n", d.a.ToString().c_str(), d.b.ToString().c_str());
  auto keys = [](const char* title, const std::vector<registry::KeyChange>& changes) {
    for (const auto& c : changes) {
      std::printf("  %-13s %-32s %s -> %s\n", title, c.key.c_str(),
                  c.from ? c.from->c_str() : "(absent)", c.to ? c.to->c_str() : "(absent)");
    }
  };
  keys("architecture", d.architecture);
  keys("config", d.config);
  keys("metric", d.metrics);
  using Kind = registry::TensorChange::Kind;
  for (const auto& t : d.tensors) {
    if (t.kind == Kind::kUnchanged) continue;
    std::string detail = t.from + (t.from.empty() || t.to.empty() ? "" : " -> ") + t.to;
    if (t.kind == Kind::kChanged) {
      char buf[48];
      std::snprintf(buf, sizeof(buf), "relative L2 %.3g", t.relative_l2);
      detail = buf;
    }
    std::printf("  %-13s %-32s %s\n", std::string(registry::TensorChangeName(t.kind)).c_str(),
                t.name.c_str(), detail.c_str());
  }
  std::printf("tensors: %d unchanged, %d changed, %d added, %d removed, %d shape-changed\n",
              d.Count(Kind::kUnchanged), d.Count(Kind::kChanged), d.Count(Kind::kAdded),
              d.Count(Kind::kRemoved), d.Count(Kind::kShapeChanged));
}

void PrintBranches(const std::vector<registry::BranchInfo>& branches) {
  std::printf("%-32s %7s  %s\n", "BRANCH", "HEAD", "UPDATED");
  for (const auto& b : branches) {
    std::printf("%-32s %7lld  %s\n", b.name.c_str(), static_cast<long long>(b.head),
                b.updated_at.c_str());
  }
}

void PrintAliases(const std::string& model, const std::vector<registry::AliasInfo>& aliases,
                  const std::vector<registry::AliasEvent>& history) {
  std::printf("%-24s %7s %-9s %s\n", "ALIAS", "VERSION", "PROTECTED", "MOVED BY / AT");
  for (const auto& a : aliases) {
    std::printf("%-24s %7lld %-9s %s at %s\n", a.name.c_str(), static_cast<long long>(a.version),
                a.protected_ ? "yes" : "no", a.updated_by.c_str(), a.updated_at.c_str());
  }
  std::printf("history of %s's aliases, newest first\n", model.c_str());
  for (const auto& e : history) {
    std::printf("  %-24s %-10s %-24s %s -> %s\n", e.at.c_str(), e.by.c_str(), e.alias.c_str(),
                OrNone(e.from).c_str(), OrNone(e.to).c_str());
  }
}

Status ExportVersion(const VersionInfo& v, const std::string& dir,
                     const std::function<Status(storage::ObjectWriter&)>& write_weights) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir + "/model.safetensors", ec)) {
    return AlreadyExistsError(dir +
                              " already holds an export (model.safetensors); choose an "
                              "empty folder");
  }
  // The folder (created when missing) as a store: each file written whole under a temporary
  // name, fsynced and renamed.
  REEL_ASSIGN_OR_RETURN(auto folder, storage::LocalStore::Open(fs::absolute(dir).string()));
  REEL_RETURN_IF_ERROR(folder->Put("config.yaml", ExportConfig(v)));
  REEL_RETURN_IF_ERROR(folder->Put("version.json", registry::VersionJson(v).dump(2)));
  // Last: its presence marks a complete export.
  REEL_ASSIGN_OR_RETURN(auto weights, folder->OpenWriter("model.safetensors"));
  REEL_RETURN_IF_ERROR(write_weights(*weights));
  return weights->Close();
}

}  // namespace reel::cli
