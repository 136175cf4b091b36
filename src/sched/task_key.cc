// The step cache's keys: a Merkle hash over a task's command, its environment, its dependencies'
// keys and the local files its arguments name (Bazel's action key, Kubeflow's cache key).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/hash.h"
#include "base/subprocess.h"
#include "sched/runner_internal.h"

namespace reel::sched::internal {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kContentHashLimit = 16u << 20;
constexpr size_t kMaxTreeEntries = 100000;

std::string FileFingerprint(const std::string& path, const struct stat& st) {
  const std::string stamp = std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) +
                            "." + std::to_string(st.st_mtim.tv_nsec);
  if (static_cast<uint64_t>(st.st_size) > kContentHashLimit) return "file " + stamp;
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return "file " + stamp;  // unreadable: its stamp will do
  return "file " + Xxh3_128Hex(bytes);
}

// Names, sizes and modification times of everything under `dir`, sorted.
std::string TreeFingerprint(const std::string& dir) {
  std::vector<std::string> entries;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    entries.push_back(fs::relative(it->path(), dir, error).string() + " " +
                      std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                      std::to_string(st.st_mtim.tv_nsec));
    if (entries.size() >= kMaxTreeEntries) break;
  }
  std::sort(entries.begin(), entries.end());
  Hasher hasher(Hasher::Kind::kSha256);
  for (const std::string& e : entries) {
    hasher.Update(e);
    hasher.Update(std::string_view("\n", 1));
  }
  return "tree " + hasher.FinishHex();
}

}  // namespace

std::string Fingerprint(const std::string& path, const std::string& workdir) {
  if (path.empty() || path.find("://") != std::string::npos) return "";
  const std::string full = path[0] == '/' || workdir.empty() ? path : workdir + "/" + path;
  struct stat st {};
  if (::stat(full.c_str(), &st) != 0) return "";
  if (S_ISREG(st.st_mode)) return FileFingerprint(full, st);
  if (S_ISDIR(st.st_mode)) return TreeFingerprint(full);
  return "";
}

Result<std::string> TaskKey(const Task& task, const Pipeline& pipeline,
                            const std::map<std::string, std::string>& inputs,
                            const std::map<std::string, std::string>& dep_keys,
                            const std::string& program, const std::string& workdir) {
  // Outputs stand in by name and dependencies' outputs by their task's key, so the key is the
  // same in every run however the runs' folders are named.
  std::map<std::string, std::map<std::string, std::string>> dep_outputs;
  for (const Task& t : pipeline.tasks) {
    const auto key = dep_keys.find(t.name);
    if (key == dep_keys.end()) continue;
    for (const std::string& out : t.outputs) {
      dep_outputs[t.name][out] = "{task " + key->second + " output " + out + "}";
    }
  }
  TemplateValues values;
  values.inputs = &inputs;
  values.task_outputs = &dep_outputs;
  for (const std::string& out : task.outputs) values.own_outputs[out] = "{output " + out + "}";
  values.run_id = "{run}";
  Hasher hasher(Hasher::Kind::kSha256);
  const auto add = [&](std::string_view field) {
    hasher.Update(field);
    hasher.Update(std::string_view("\0", 1));
  };
  add("reel pipeline task v1");
  add(Fingerprint(program, workdir));
  // `reel` hands LibTorch's commands to reel-torch beside it (apps/reel/commands.h): a change to
  // either is a change to the program.
  if (!task.command.empty() && task.command[0] == "reel") {
    add(Fingerprint((fs::path(program).parent_path() / "reel-torch").string(), workdir));
  }
  for (const std::string& arg : task.command) {
    REEL_ASSIGN_OR_RETURN(std::string rendered, Render(arg, task, pipeline, values));
    add(rendered);
    // "--set key=PATH" and "PATH" both name files whose contents count.
    add(Fingerprint(rendered, workdir));
    if (const size_t eq = rendered.find('='); eq != std::string::npos) {
      add(Fingerprint(rendered.substr(eq + 1), workdir));
    }
  }
  for (const auto& [name, value] : task.env) {
    REEL_ASSIGN_OR_RETURN(std::string rendered, Render(value, task, pipeline, values));
    add(name + "=" + rendered);
  }
  add(task.item.value_or(""));
  for (const auto& [name, key] : dep_keys) add(name + " " + key);
  return hasher.FinishHex();
}

Result<std::string> ResolveProgram(const std::string& name, const std::string& reel_binary) {
  if (name == "reel" && !reel_binary.empty()) return reel_binary;
  if (name == "reel") {
    std::error_code error;
    const fs::path self = fs::read_symlink("/proc/self/exe", error);
    if (error) return NotFoundError("program 'reel': /proc/self/exe: " + error.message());
    return self.string();
  }
  return FindProgram(name);
}

}  // namespace reel::sched::internal
