// A job's own cgroup, so that the kernel holds the job to its memory request (and, given cores,
// to a cpuset): cgroup v2 where the unified hierarchy offers the memory controller and Reel may
// create groups in it, else the v1 memory and cpuset hierarchies where writable. Where neither
// is, Create returns null and the shim polls resident memory instead (shim.h).
//
//   auto group = JobCgroup::Create("job-3-4711", {4 << 30, "2-3"});
//   if (group.ok() && *group) (*group)->Enter();   // then spawn: children inherit it
//   ...
//   if ((*group)->OomKilled()) ...                 // the kernel killed a process for memory
//
// The group is removed when the object goes (its remaining processes killed first).
// Thread-safety: one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::sched {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: no memory limit
  std::string cpus;          // a cpuset list ("0-1,4"); "": no cpuset
};

class JobCgroup {
 public:
  // Null when this machine lets Reel create no cgroup with the controllers `limits` needs (no
  // cgroup file system, read-only, or the controller missing). Errors: a group that was created
  // but refused a limit (its message names the file); the group is removed again.
  static Result<std::unique_ptr<JobCgroup>> Create(const std::string& name,
                                                   const CgroupLimits& limits);
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  // Moves the calling process into the group (its children started later inherit it).
  Status Enter();
  // The group's cgroup.procs files, for a child to join before exec (SpawnOptions).
  std::vector<std::string> ProcsFiles() const;
  // Whether the kernel's OOM killer has killed a process of the group.
  bool OomKilled() const;
  // The group's peak memory use so far (bytes; 0 when the kernel does not say).
  int64_t PeakBytes() const;
  // "cgroup v2" or "cgroup v1", for reports.
  const std::string& kind() const { return kind_; }

 private:
  JobCgroup() = default;
  std::string kind_;
  std::vector<std::string> dirs_;  // the group's folder in each hierarchy it uses
  std::string memory_dir_;         // the one holding its memory controller
};

}  // namespace reel::sched
