// Pieces of the runner with a job each, shared by runner.cc and the tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "sched/pipeline.h"
#include "sched/run_store.h"

namespace reel {
class ConfigNode;
}

namespace reel::sched::internal {

// `node`'s cpu ("2", "500m"), memory ("4Gi") and gpu (a count), each `defaults`' when absent;
// errors name file:line and the key. `check_keys`: refuse any other key in `node`.
Result<Resources> ReadResources(const ConfigNode& node, Resources defaults, bool check_keys);

// What a local path names, for a cache key: a file's bytes (by size and modification time when
// over 16 MiB), a folder's tree of names, sizes and times; "" when `path` names nothing.
std::string Fingerprint(const std::string& path, const std::string& workdir);

// The step cache's key of `task` (see runner.h). `dep_keys`: the keys of every task it depends
// on, by name; `program`: the resolved argv[0] (its file is part of the key).
Result<std::string> TaskKey(const Task& task, const Pipeline& pipeline,
                            const std::map<std::string, std::string>& inputs,
                            const std::map<std::string, std::string>& dep_keys,
                            const std::string& program, const std::string& workdir);

// `name` as a program path: "reel" is `reel_binary`, a name with a '/' stays, anything else is
// looked up on PATH. Errors: NotFound naming the program.
Result<std::string> ResolveProgram(const std::string& name, const std::string& reel_binary);

// Runs the pipeline's on_success or on_failure hook for a finished run. A command gets the run
// in its environment and its output in `log_path`; a URL gets a JSON POST. Errors: the hook
// failing (exit status, HTTP status, unreachable).
Status RunHook(const Hook& hook, const RunRecord& run, const std::string& log_path);

}  // namespace reel::sched::internal
