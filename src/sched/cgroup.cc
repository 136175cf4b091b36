#include "sched/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/files.h"
#include "base/unique_fd.h"

namespace reel::sched {
namespace {

struct Mounts {
  std::string v2;              // the unified hierarchy's mount point
  std::string memory, cpuset;  // v1 hierarchies' mount points
};

Mounts FindMounts() {
  Mounts m;
  std::ifstream in("/proc/self/mounts");
  std::string device, point, type, options;
  std::string rest;
  while (in >> device >> point >> type >> options) {
    std::getline(in, rest);
    if (type == "cgroup2") m.v2 = point;
    if (type != "cgroup") continue;
    std::istringstream list(options);
    for (std::string option; std::getline(list, option, ',');) {
      if (option == "memory") m.memory = point;
      if (option == "cpuset") m.cpuset = point;
    }
  }
  return m;
}

Status WriteControl(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return PermissionDeniedError(path + ": " + std::strerror(errno));
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return PermissionDeniedError("writing '" + value + "' to " + path + ": " +
                                 std::strerror(errno));
  }
  return Status::Ok();
}

// The file's text without its trailing newline; "" when unreadable.
std::string ReadControl(const std::string& path) {
  Result<std::string> text = ReadFileToString(path, "cgroup file");
  if (!text.ok()) return {};
  while (!text->empty() && std::isspace(static_cast<unsigned char>(text->back()))) text->pop_back();
  return *text;
}

// A "key value" line's value in a flat-keyed file (memory.events, memory.oom_control).
int64_t KeyedValue(const std::string& path, const std::string& key) {
  std::istringstream in(ReadControl(path));
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

bool MakeDir(const std::string& path) { return mkdir(path.c_str(), 0755) == 0 || errno == EEXIST; }

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  for (std::string w; in >> w;) {
    if (w == word) return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<JobCgroup>> JobCgroup::Create(const std::string& name,
                                                     const CgroupLimits& limits) {
  const Mounts m = FindMounts();
  std::unique_ptr<JobCgroup> group(new JobCgroup());
  // v2: the mount's root delegates the controllers to reel/, whose children are the jobs (the
  // root is exempt from the no-internal-processes rule; a container's root is not, and then
  // enabling fails and v1 is tried).
  if (!m.v2.empty()) {
    const std::string controllers = ReadControl(m.v2 + "/cgroup.controllers");
    const bool usable =
        HasWord(controllers, "memory") && (limits.cpus.empty() || HasWord(controllers, "cpuset"));
    const std::string enable = limits.cpus.empty() ? "+memory" : "+memory +cpuset";
    if (usable && WriteControl(m.v2 + "/cgroup.subtree_control", enable).ok() &&
        MakeDir(m.v2 + "/reel") &&
        WriteControl(m.v2 + "/reel/cgroup.subtree_control", enable).ok() &&
        MakeDir(m.v2 + "/reel/" + name)) {
      const std::string dir = m.v2 + "/reel/" + name;
      group->kind_ = "cgroup v2";
      group->dirs_ = {dir};
      group->memory_dir_ = dir;
      if (limits.memory_bytes > 0) {
        REEL_RETURN_IF_ERROR(
            WriteControl(dir + "/memory.max", std::to_string(limits.memory_bytes)));
        (void)WriteControl(dir + "/memory.swap.max", "0");  // absent without swap accounting
      }
      if (!limits.cpus.empty())
        REEL_RETURN_IF_ERROR(WriteControl(dir + "/cpuset.cpus", limits.cpus));
      return group;
    }
  }
  // v1: a group per hierarchy.
  if (m.memory.empty() || !MakeDir(m.memory + "/reel") || !MakeDir(m.memory + "/reel/" + name)) {
    return std::unique_ptr<JobCgroup>();
  }
  group->kind_ = "cgroup v1";
  group->memory_dir_ = m.memory + "/reel/" + name;
  group->dirs_.push_back(group->memory_dir_);
  if (limits.memory_bytes > 0) {
    REEL_RETURN_IF_ERROR(WriteControl(group->memory_dir_ + "/memory.limit_in_bytes",
                                      std::to_string(limits.memory_bytes)));
    // With swap accounting, memory + swap too (or the job would swap past its request).
    (void)WriteControl(group->memory_dir_ + "/memory.memsw.limit_in_bytes",
                       std::to_string(limits.memory_bytes));
  }
  if (!limits.cpus.empty()) {
    // A new v1 cpuset group starts with no cpus and no memory nodes: reel/ takes its parent's.
    const std::string parent = m.cpuset + "/reel";
    if (m.cpuset.empty() || !MakeDir(parent)) {
      return PermissionDeniedError("no writable cpuset hierarchy for cpus " + limits.cpus);
    }
    for (const char* file : {"/cpuset.cpus", "/cpuset.mems"}) {
      if (ReadControl(parent + file).empty()) {
        REEL_RETURN_IF_ERROR(WriteControl(parent + file, ReadControl(m.cpuset + file)));
      }
    }
    const std::string dir = parent + "/" + name;
    if (!MakeDir(dir)) return PermissionDeniedError("cannot create " + dir);
    group->dirs_.push_back(dir);
    REEL_RETURN_IF_ERROR(WriteControl(dir + "/cpuset.mems", ReadControl(parent + "/cpuset.mems")));
    REEL_RETURN_IF_ERROR(WriteControl(dir + "/cpuset.cpus", limits.cpus));
  }
  return group;
}

JobCgroup::~JobCgroup() {
  const pid_t self = getpid();
  for (const std::string& dir : dirs_) {
    // Out of the group (into its hierarchy's root), then whatever is left in it is killed.
    const std::string root = dir.substr(0, dir.rfind("/reel/"));
    (void)WriteControl(root + "/cgroup.procs", std::to_string(self));
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::istringstream procs(ReadControl(dir + "/cgroup.procs"));
      for (pid_t p = 0; procs >> p;) {
        if (p > 0 && p != self) kill(p, SIGKILL);
      }
      if (rmdir(dir.c_str()) == 0 || errno == ENOENT) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // killed ones still exiting
    }
  }
}

Status JobCgroup::Enter() {
  for (const std::string& dir : dirs_) {
    REEL_RETURN_IF_ERROR(WriteControl(dir + "/cgroup.procs", std::to_string(getpid())));
  }
  return Status::Ok();
}

std::vector<std::string> JobCgroup::ProcsFiles() const {
  std::vector<std::string> files;
  for (const std::string& dir : dirs_) files.push_back(dir + "/cgroup.procs");
  return files;
}

bool JobCgroup::OomKilled() const {
  if (kind_ == "cgroup v2") return KeyedValue(memory_dir_ + "/memory.events", "oom_kill") > 0;
  return KeyedValue(memory_dir_ + "/memory.oom_control", "oom_kill") > 0;
}

int64_t JobCgroup::PeakBytes() const {
  const std::string file = kind_ == "cgroup v2" ? "/memory.peak" : "/memory.max_usage_in_bytes";
  const std::string text = ReadControl(memory_dir_ + file);
  return text.empty() ? 0 : std::strtoll(text.c_str(), nullptr, 10);
}

}  // namespace reel::sched
