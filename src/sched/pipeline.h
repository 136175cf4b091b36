// A pipeline: tasks (any command, `reel` subcommands included) with resource requests,
// dependencies, retries, timeouts, outputs passed to later tasks as URIs, and fan-out over a list,
// read from a YAML file in the spirit of Argo and Kubeflow Pipelines:
//
//   name: main
//   inputs: {raw: ./videos}                 # defaults; `--input raw=...` overrides
//   tasks:
//     - name: ingest
//       command: [reel, ingest, "{{inputs.raw}}", "{{outputs.dataset}}"]
//       resources: {cpu: 2, memory: 4Gi}
//       retries: 2                          # backoff: 1s doubling, or {duration, factor, max}
//       timeout: 30m
//     - name: train
//       depends_on: [ingest]                # implied by a {{tasks.ingest...}} reference too
//       command: [reel, train, --set, "data.dataset={{tasks.ingest.outputs.dataset}}"]
//
// Templates in command and env: {{inputs.NAME}}, {{outputs.NAME}} (declares an output: the runner
// gives it a URI under the run's artifacts), {{tasks.TASK.outputs.NAME}} (an earlier task's output;
// a fanned-out task's outputs joined by commas), {{item}} (the element of `for_each`), {{run.id}}.
// Every reference is checked when the file is read.
//
// Errors: InvalidArgument naming file:line:col and the key (a bad field, an unknown dependency or
// reference, a duplicate name), or naming the tasks of a dependency cycle. Thread-safety: values.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::sched {

struct Resources {
  int64_t cpu_millis = 1000;
  int64_t memory_bytes = 0;
  int64_t gpu = 0;

  bool FitsIn(const Resources& free) const;
  Resources& operator+=(const Resources& other);
  Resources& operator-=(const Resources& other);
};
// "cpu 2, memory 8Gi, gpu 1" (memory and gpu only when asked for).
std::string ResourcesText(const Resources& r);

// What to do when a run ends: run a command (its environment holds REEL_RUN_ID, REEL_RUN_STATE
// and REEL_FAILED_TASK) or POST {"run", "pipeline", "state", "failed_task"} to a URL.
struct Hook {
  std::vector<std::string> command;
  std::string url;
  bool empty() const { return command.empty() && url.empty(); }
};

struct Task {
  std::string name;   // unique: the file's name, or "NAME.I" for element I of a fan-out
  std::string group;  // the name in the file
  std::vector<std::string> command;        // templates
  std::map<std::string, std::string> env;  // values are templates
  Resources resources;
  std::vector<std::string> depends_on;  // task names (fan-outs expanded), file order
  std::vector<std::string> outputs;     // names of {{outputs.NAME}}, sorted
  int retries = 0;
  std::chrono::milliseconds backoff{1000};
  double backoff_factor = 2;
  std::chrono::milliseconds max_backoff{300000};
  std::optional<std::chrono::milliseconds> timeout;
  bool cache = true;
  std::optional<std::string> item;  // set for fanned-out tasks
  std::string where;                // "main.yaml:12:5", for messages

  // The pause before attempt `attempt + 1` after attempt `attempt` (1-based) failed.
  std::chrono::milliseconds BackoffAfter(int attempt) const;
};

struct Pipeline {
  std::string name;
  std::string source_name;  // the file it was read from
  std::string source;       // its text: runs keep it, so a retry reads the same pipeline
  std::map<std::string, std::string> inputs;  // every input with its value
  std::vector<Task> tasks;                    // file order, fan-outs expanded
  Hook on_success, on_failure;
  std::chrono::milliseconds ttl_after_finished{0};  // scratch space kept this long after the end
  std::string artifacts;  // root URI of outputs; empty: the state folder's artifacts/
};

// `inputs` override the file's defaults; an input the file does not declare is an error, as is
// a declared input left without a value.
Result<Pipeline> ParsePipeline(std::string_view yaml, std::string source_name,
                               const std::map<std::string, std::string>& inputs = {});
Result<Pipeline> LoadPipeline(const std::string& path,
                              const std::map<std::string, std::string>& inputs = {});

// Kahn's algorithm: positions into `tasks` such that every task comes after its dependencies;
// among tasks ready together, file order. Errors: InvalidArgument naming the tasks on a cycle.
Result<std::vector<size_t>> TopologicalOrder(const std::vector<Task>& tasks);

// What templates resolve to for one task.
struct TemplateValues {
  const std::map<std::string, std::string>* inputs = nullptr;
  // task name -> output name -> value (a URI, or a cache key's stand-in)
  const std::map<std::string, std::map<std::string, std::string>>* task_outputs = nullptr;
  std::map<std::string, std::string> own_outputs;
  std::string run_id;
};

// `text` with its {{...}} references replaced. Errors: InvalidArgument for a reference without
// a value (ParsePipeline has checked names, so this means a caller's bug or a missing output).
Result<std::string> Render(std::string_view text, const Task& task, const Pipeline& pipeline,
                           const TemplateValues& values);

}  // namespace reel::sched
