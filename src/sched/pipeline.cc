#include "sched/pipeline.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "base/config.h"
#include "base/files.h"
#include "base/quantity.h"
#include "base/strings.h"
#include "sched/runner_internal.h"

namespace reel::sched {
namespace {

using std::chrono::milliseconds;

constexpr int kMaxRetries = 100;
constexpr size_t kMaxFanOut = 10000;

bool ValidName(std::string_view name) {
  return !name.empty() && name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string Quoted(std::string_view s) { return "'" + PrintableForMessage(s) + "'"; }

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// One {{...}} reference, split at its dots.
struct Reference {
  std::vector<std::string> parts;
  std::string text;  // as written, for messages
};

// Calls `fn(reference)` for every {{...}} in `text`, and `literal(piece)` for the text between.
// Errors: an unclosed "{{".
template <typename Fn, typename Literal>
Status ForEachReference(std::string_view text, Fn&& fn, Literal&& literal) {
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("{{", pos);
    literal(text.substr(pos, open == std::string_view::npos ? open : open - pos));
    if (open == std::string_view::npos) return Status::Ok();
    const size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return InvalidArgumentError("unclosed '{{' in " + Quoted(text));
    }
    Reference ref;
    ref.text = std::string(text.substr(open, close + 2 - open));
    const std::string inner = Trim(text.substr(open + 2, close - open - 2));
    size_t start = 0;
    while (true) {
      const size_t dot = inner.find('.', start);
      ref.parts.push_back(inner.substr(start, dot == std::string::npos ? dot : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    REEL_RETURN_IF_ERROR(fn(ref));
    pos = close + 2;
  }
}

Result<std::vector<std::string>> StringList(const ConfigNode& node) {
  std::vector<std::string> out;
  if (!node.IsSequence()) return node.Error("expected a list of strings");
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> elements, node.Elements());
  for (const ConfigNode& e : elements) {
    REEL_ASSIGN_OR_RETURN(std::string s, e.AsString());
    out.push_back(std::move(s));
  }
  return out;
}

Result<milliseconds> DurationOf(const ConfigNode& node) {
  REEL_ASSIGN_OR_RETURN(std::string text, node.AsString());
  Result<milliseconds> d = ParseDuration(text);
  if (!d.ok()) return node.Error(d.status().message());
  return *d;
}

Status ParseBackoff(const ConfigNode& task, Task* t) {
  if (!task.Has("backoff")) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(ConfigNode node, task.Child("backoff"));
  if (!node.IsMap()) {
    REEL_ASSIGN_OR_RETURN(t->backoff, DurationOf(node));
    return Status::Ok();
  }
  REEL_RETURN_IF_ERROR(node.CheckKeys({"duration", "factor", "max"}));
  if (node.Has("duration")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode d, node.Child("duration"));
    REEL_ASSIGN_OR_RETURN(t->backoff, DurationOf(d));
  }
  REEL_ASSIGN_OR_RETURN(t->backoff_factor, node.GetDouble("factor", 2));
  if (!(t->backoff_factor >= 1 && t->backoff_factor <= 100)) {
    return node.Error("factor must be between 1 and 100");
  }
  if (node.Has("max")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode m, node.Child("max"));
    REEL_ASSIGN_OR_RETURN(t->max_backoff, DurationOf(m));
  }
  return Status::Ok();
}

Result<Hook> ParseHook(const ConfigNode& node) {
  Hook hook;
  if (node.IsSequence()) {
    REEL_ASSIGN_OR_RETURN(hook.command, StringList(node));
    if (hook.command.empty()) return node.Error("an empty command");
    return hook;
  }
  REEL_ASSIGN_OR_RETURN(hook.url, node.AsString());
  if (hook.url.rfind("https://", 0) == 0) {
    return node.Error("https:// webhooks are not supported yet: use http:// or a command");
  }
  if (hook.url.rfind("http://", 0) != 0) {
    return node.Error("expected a command (a list) or an http:// URL, got " + Quoted(hook.url));
  }
  return hook;
}

// The parsed file before fan-out: one per `tasks` element.
struct TaskTemplate {
  Task task;
  ConfigNode node;
  std::vector<std::string> depends_on;  // group names
  std::optional<std::vector<std::string>> for_each;
  std::optional<ConfigNode> for_each_node;
};

// The values of `for_each`: a list, or a string rendered with the inputs and split at commas.
Result<std::vector<std::string>> ForEachValues(const ConfigNode& node,
                                               const std::map<std::string, std::string>& inputs) {
  if (node.IsSequence()) return StringList(node);
  REEL_ASSIGN_OR_RETURN(std::string text, node.AsString());
  std::string rendered;
  Status s = ForEachReference(
      text,
      [&](const Reference& ref) -> Status {
        if (ref.parts.size() != 2 || ref.parts[0] != "inputs" || inputs.count(ref.parts[1]) == 0) {
          return node.Error("for_each may refer to inputs only ({{inputs.NAME}}), not " + ref.text);
        }
        rendered += inputs.at(ref.parts[1]);
        return Status::Ok();
      },
      [&](std::string_view literal) { rendered += literal; });
  if (!s.ok()) return node.Error(s.message());
  std::vector<std::string> values;
  size_t start = 0;
  while (start <= rendered.size()) {
    const size_t comma = rendered.find(',', start);
    std::string v = Trim(std::string_view(rendered).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!v.empty()) values.push_back(std::move(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

Result<TaskTemplate> ParseTask(const ConfigNode& node,
                               const std::map<std::string, std::string>& inputs) {
  if (!node.IsMap()) return node.Error("a task must be a map with name and command");
  REEL_RETURN_IF_ERROR(
      node.CheckKeys({"name", "command", "env", "resources", "depends_on", "retries", "backoff",
                      "timeout", "cache", "for_each", "outputs"}));
  TaskTemplate tt{Task{}, node, {}, std::nullopt, std::nullopt};
  Task& t = tt.task;
  t.where = node.Where();
  REEL_ASSIGN_OR_RETURN(t.group, node.GetString("name"));
  if (!ValidName(t.group)) {
    return node.Error("task name " + Quoted(t.group) + " must be 1-63 letters, digits, '_' or '-'");
  }
  REEL_ASSIGN_OR_RETURN(ConfigNode command, node.Child("command"));
  REEL_ASSIGN_OR_RETURN(t.command, StringList(command));
  if (t.command.empty()) return command.Error("a command needs at least the program");
  if (node.Has("env")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode env, node.Child("env"));
    if (!env.IsMap()) return env.Error("expected a map of NAME: value");
    for (const std::string& key : env.Keys()) {
      REEL_ASSIGN_OR_RETURN(t.env[key], env.GetString(key));
    }
  }
  if (node.Has("resources")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode r, node.Child("resources"));
    REEL_ASSIGN_OR_RETURN(t.resources, internal::ReadResources(r, Resources{}, true));
  }
  if (node.Has("depends_on")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode d, node.Child("depends_on"));
    REEL_ASSIGN_OR_RETURN(tt.depends_on, StringList(d));
  }
  REEL_ASSIGN_OR_RETURN(const int64_t retries, node.GetInt("retries", 0));
  if (retries < 0 || retries > kMaxRetries) {
    return node.Error("retries must be between 0 and " + std::to_string(kMaxRetries));
  }
  t.retries = static_cast<int>(retries);
  REEL_RETURN_IF_ERROR(ParseBackoff(node, &t));
  if (node.Has("timeout")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode timeout, node.Child("timeout"));
    REEL_ASSIGN_OR_RETURN(t.timeout, DurationOf(timeout));
    if (*t.timeout <= milliseconds(0)) return timeout.Error("timeout must be above 0");
  }
  REEL_ASSIGN_OR_RETURN(t.cache, node.GetBool("cache", true));
  if (node.Has("outputs")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode o, node.Child("outputs"));
    REEL_ASSIGN_OR_RETURN(t.outputs, StringList(o));
  }
  if (node.Has("for_each")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode f, node.Child("for_each"));
    REEL_ASSIGN_OR_RETURN(tt.for_each, ForEachValues(f, inputs));
    if (tt.for_each->size() > kMaxFanOut) {
      return f.Error("for_each over " + std::to_string(tt.for_each->size()) + " values; at most " +
                     std::to_string(kMaxFanOut));
    }
    tt.for_each_node = f;
  }
  return tt;
}

// Checks every {{...}} of a task and collects what it implies: outputs it declares and tasks
// whose outputs it reads (added to its dependencies).
Status CheckReferences(TaskTemplate* tt, const std::map<std::string, std::string>& inputs,
                       const std::set<std::string>& groups) {
  Task& t = tt->task;
  std::set<std::string> outputs(t.outputs.begin(), t.outputs.end());
  const auto check = [&](const Reference& ref) -> Status {
    const auto& p = ref.parts;
    if (p.size() == 2 && p[0] == "inputs") {
      if (inputs.count(p[1]) == 0) return InvalidArgumentError("unknown input in " + ref.text);
    } else if (p.size() == 2 && p[0] == "outputs" && ValidName(p[1])) {
      outputs.insert(p[1]);
    } else if (p.size() == 4 && p[0] == "tasks" && p[2] == "outputs") {
      if (groups.count(p[1]) == 0) return InvalidArgumentError("unknown task in " + ref.text);
      if (p[1] == t.group) return InvalidArgumentError(ref.text + " refers to the task itself");
      if (std::find(tt->depends_on.begin(), tt->depends_on.end(), p[1]) == tt->depends_on.end()) {
        tt->depends_on.push_back(p[1]);
      }
    } else if (p.size() == 1 && p[0] == "item") {
      if (!tt->for_each) return InvalidArgumentError(ref.text + " outside a for_each task");
    } else if (!(p.size() == 2 && p[0] == "run" && p[1] == "id")) {
      return InvalidArgumentError("unknown reference " + ref.text +
                                  " (expected inputs.NAME, outputs.NAME, tasks.TASK.outputs.NAME, "
                                  "item or run.id)");
    }
    return Status::Ok();
  };
  std::vector<std::string> texts = t.command;
  for (const auto& [key, value] : t.env) texts.push_back(value);
  for (const std::string& text : texts) {
    Status s = ForEachReference(text, check, [](std::string_view) {});
    if (!s.ok()) return tt->node.Error(s.message());
  }
  t.outputs.assign(outputs.begin(), outputs.end());
  return Status::Ok();
}

// After every task is read: dependencies name tasks, and outputs read from a task are outputs
// it declares.
Status CheckLinks(const std::vector<TaskTemplate>& tts) {
  std::map<std::string, const Task*> by_group;
  for (const TaskTemplate& tt : tts) by_group[tt.task.group] = &tt.task;
  for (const TaskTemplate& tt : tts) {
    for (const std::string& d : tt.depends_on) {
      if (by_group.count(d) == 0) {
        return tt.node.Error("depends_on names an unknown task " + Quoted(d));
      }
      if (d == tt.task.group) return tt.node.Error("a task cannot depend on itself");
    }
    std::vector<std::string> texts = tt.task.command;
    for (const auto& [key, value] : tt.task.env) texts.push_back(value);
    for (const std::string& text : texts) {
      Status s = ForEachReference(
          text,
          [&](const Reference& ref) -> Status {
            const auto& p = ref.parts;
            if (p.size() != 4 || p[0] != "tasks") return Status::Ok();
            const auto& outs = by_group[p[1]]->outputs;
            if (!std::binary_search(outs.begin(), outs.end(), p[3])) {
              return tt.node.Error(ref.text + ": task " + Quoted(p[1]) + " has no output " +
                                   Quoted(p[3]));
            }
            return Status::Ok();
          },
          [](std::string_view) {});
      REEL_RETURN_IF_ERROR(s);
    }
  }
  return Status::Ok();
}

// Fan-out: a task with for_each becomes NAME.0, NAME.1, ...; dependencies on it, every one.
std::vector<Task> Expand(std::vector<TaskTemplate>& tts) {
  std::map<std::string, std::vector<std::string>> names;
  for (TaskTemplate& tt : tts) {
    if (!tt.for_each) {
      names[tt.task.group] = {tt.task.group};
      continue;
    }
    for (size_t i = 0; i < tt.for_each->size(); ++i) {
      names[tt.task.group].push_back(tt.task.group + "." + std::to_string(i));
    }
  }
  std::vector<Task> tasks;
  for (TaskTemplate& tt : tts) {
    std::vector<std::string> deps;
    for (const std::string& d : tt.depends_on) {
      deps.insert(deps.end(), names[d].begin(), names[d].end());
    }
    tt.task.depends_on = deps;
    if (!tt.for_each) {
      tt.task.name = tt.task.group;
      tasks.push_back(tt.task);
      continue;
    }
    for (size_t i = 0; i < tt.for_each->size(); ++i) {
      Task t = tt.task;
      t.name = names[tt.task.group][i];
      t.item = (*tt.for_each)[i];
      tasks.push_back(std::move(t));
    }
  }
  return tasks;
}

Status ParseInputs(const ConfigNode& root, const std::map<std::string, std::string>& overrides,
                   Pipeline* p) {
  if (root.Has("inputs")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode node, root.Child("inputs"));
    if (!node.IsMap()) return node.Error("expected a map of NAME: default value (or null)");
    for (const std::string& key : node.Keys()) {
      if (!ValidName(key)) return node.Error("input name " + Quoted(key) + " is not a valid name");
      REEL_ASSIGN_OR_RETURN(ConfigNode value, node.Child(key));
      if (value.IsNull()) {
        p->inputs[key];  // declared, no default: must be given
        continue;
      }
      REEL_ASSIGN_OR_RETURN(p->inputs[key], value.AsString());
    }
  }
  std::set<std::string> missing;
  for (const auto& [key, value] : p->inputs) {
    if (value.empty()) missing.insert(key);
  }
  for (const auto& [key, value] : overrides) {
    if (p->inputs.count(key) == 0) {
      return InvalidArgumentError(p->source_name + ": no input " + Quoted(key) +
                                  " (the file's inputs: " +
                                  [&] {
                                    std::string names;
                                    for (const auto& kv : p->inputs) {
                                      names += (names.empty() ? "" : ", ") + kv.first;
                                    }
                                    return names.empty() ? std::string("none") : names;
                                  }() +
                                  ")");
    }
    p->inputs[key] = value;
    missing.erase(key);
  }
  if (!missing.empty()) {
    return InvalidArgumentError(p->source_name + ": input " + Quoted(*missing.begin()) +
                                " has no value: pass --input " + *missing.begin() + "=VALUE");
  }
  return Status::Ok();
}

Status ParseTop(const ConfigNode& root, Pipeline* p) {
  REEL_RETURN_IF_ERROR(root.CheckKeys(
      {"name", "inputs", "tasks", "on_success", "on_failure", "ttl_after_finished", "artifacts"}));
  REEL_ASSIGN_OR_RETURN(p->name, root.GetString("name"));
  if (!ValidName(p->name)) {
    REEL_ASSIGN_OR_RETURN(ConfigNode n, root.Child("name"));
    return n.Error("pipeline name " + Quoted(p->name) +
                   " must be 1-63 letters, digits, '_' or '-'");
  }
  for (const char* key : {"on_success", "on_failure"}) {
    if (!root.Has(key)) continue;
    REEL_ASSIGN_OR_RETURN(ConfigNode node, root.Child(key));
    REEL_ASSIGN_OR_RETURN(Hook hook, ParseHook(node));
    (std::string_view(key) == "on_success" ? p->on_success : p->on_failure) = std::move(hook);
  }
  if (root.Has("ttl_after_finished")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode ttl, root.Child("ttl_after_finished"));
    REEL_ASSIGN_OR_RETURN(p->ttl_after_finished, DurationOf(ttl));
  }
  REEL_ASSIGN_OR_RETURN(p->artifacts, root.GetString("artifacts", ""));
  return Status::Ok();
}

}  // namespace

bool Resources::FitsIn(const Resources& free) const {
  return cpu_millis <= free.cpu_millis && memory_bytes <= free.memory_bytes && gpu <= free.gpu;
}

Resources& Resources::operator+=(const Resources& other) {
  cpu_millis += other.cpu_millis;
  memory_bytes += other.memory_bytes;
  gpu += other.gpu;
  return *this;
}

Resources& Resources::operator-=(const Resources& other) {
  cpu_millis -= other.cpu_millis;
  memory_bytes -= other.memory_bytes;
  gpu -= other.gpu;
  return *this;
}

std::string ResourcesText(const Resources& r) {
  std::string text = "cpu " + FormatCpu(r.cpu_millis);
  if (r.memory_bytes > 0) text += ", memory " + FormatMemory(r.memory_bytes);
  if (r.gpu > 0) text += ", gpu " + std::to_string(r.gpu);
  return text;
}

std::chrono::milliseconds Task::BackoffAfter(int attempt) const {
  const double ms = static_cast<double>(backoff.count()) * std::pow(backoff_factor, attempt - 1);
  return std::min(
      max_backoff,
      milliseconds(static_cast<int64_t>(std::min(ms, static_cast<double>(max_backoff.count())))));
}

Result<Pipeline> ParsePipeline(std::string_view yaml, std::string source_name,
                               const std::map<std::string, std::string>& inputs) {
  REEL_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadString(yaml, source_name));
  if (!root.IsMap()) return root.Error("a pipeline is a map with name and tasks");
  Pipeline p;
  p.source_name = std::move(source_name);
  p.source = std::string(yaml);
  REEL_RETURN_IF_ERROR(ParseTop(root, &p));
  REEL_RETURN_IF_ERROR(ParseInputs(root, inputs, &p));
  REEL_ASSIGN_OR_RETURN(ConfigNode tasks_node, root.Child("tasks"));
  if (!tasks_node.IsSequence()) return tasks_node.Error("expected a list of tasks");
  REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> elements, tasks_node.Elements());
  if (elements.empty()) return tasks_node.Error("a pipeline needs at least one task");
  std::vector<TaskTemplate> tts;
  std::set<std::string> groups;
  for (const ConfigNode& e : elements) {
    REEL_ASSIGN_OR_RETURN(TaskTemplate tt, ParseTask(e, p.inputs));
    if (!groups.insert(tt.task.group).second) {
      return e.Error("a second task named " + Quoted(tt.task.group));
    }
    tts.push_back(std::move(tt));
  }
  for (TaskTemplate& tt : tts) REEL_RETURN_IF_ERROR(CheckReferences(&tt, p.inputs, groups));
  REEL_RETURN_IF_ERROR(CheckLinks(tts));
  p.tasks = Expand(tts);
  REEL_RETURN_IF_ERROR(TopologicalOrder(p.tasks).status());
  return p;
}

Result<Pipeline> LoadPipeline(const std::string& path,
                              const std::map<std::string, std::string>& inputs) {
  REEL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "pipeline file"));
  return ParsePipeline(text, path, inputs);
}

Result<std::vector<size_t>> TopologicalOrder(const std::vector<Task>& tasks) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tasks.size(); ++i) index[tasks[i].name] = i;
  std::vector<size_t> indegree(tasks.size(), 0);
  std::vector<std::vector<size_t>> dependents(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    for (const std::string& d : tasks[i].depends_on) {
      const auto it = index.find(d);
      if (it == index.end()) {
        return InvalidArgumentError(tasks[i].where + ": depends on an unknown task " + Quoted(d));
      }
      ++indegree[i];
      dependents[it->second].push_back(i);
    }
  }
  std::set<size_t> ready;  // ordered: among ready tasks, file order
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (indegree[i] == 0) ready.insert(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t d : dependents[i]) {
      if (--indegree[d] == 0) ready.insert(d);
    }
  }
  if (order.size() == tasks.size()) return order;
  // What is left holds a cycle: follow unfinished dependencies from one of them until a task
  // repeats; the repeat's loop is the cycle to name.
  size_t at = 0;
  while (indegree[at] == 0) ++at;
  std::vector<size_t> path;
  std::map<size_t, size_t> seen;
  while (seen.count(at) == 0) {
    seen[at] = path.size();
    path.push_back(at);
    for (const std::string& d : tasks[at].depends_on) {
      if (indegree[index[d]] != 0) {
        at = index[d];
        break;
      }
    }
  }
  std::string cycle;
  for (size_t k = seen[at]; k < path.size(); ++k) cycle += tasks[path[k]].name + " -> ";
  cycle += tasks[at].name;
  return InvalidArgumentError("the pipeline's dependencies form a cycle: " + cycle);
}

Result<std::string> Render(std::string_view text, const Task& task, const Pipeline& pipeline,
                           const TemplateValues& values) {
  std::string out;
  const auto missing = [&](const Reference& ref) {
    return InvalidArgumentError("task " + Quoted(task.name) + ": no value for " + ref.text);
  };
  const auto resolve = [&](const Reference& ref) -> Status {
    const auto& p = ref.parts;
    if (p[0] == "inputs") {
      if (values.inputs == nullptr || values.inputs->count(p[1]) == 0) return missing(ref);
      out += values.inputs->at(p[1]);
    } else if (p[0] == "outputs") {
      const auto it = values.own_outputs.find(p[1]);
      if (it == values.own_outputs.end()) return missing(ref);
      out += it->second;
    } else if (p[0] == "tasks") {
      std::string joined;
      for (const Task& t : pipeline.tasks) {
        if (t.group != p[1]) continue;
        const auto outs = values.task_outputs == nullptr ? nullptr : &*values.task_outputs;
        if (outs == nullptr || outs->count(t.name) == 0 || outs->at(t.name).count(p[3]) == 0) {
          return missing(ref);
        }
        joined += (joined.empty() ? "" : ",") + outs->at(t.name).at(p[3]);
      }
      out += joined;
    } else if (p[0] == "item") {
      if (!task.item) return missing(ref);
      out += *task.item;
    } else {
      out += values.run_id;
    }
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(
      ForEachReference(text, resolve, [&](std::string_view literal) { out += literal; }));
  return out;
}

namespace internal {

Result<Resources> ReadResources(const ConfigNode& node, Resources defaults, bool check_keys) {
  if (check_keys) REEL_RETURN_IF_ERROR(node.CheckKeys({"cpu", "memory", "gpu"}));
  Resources r = defaults;
  // A quantity ("2", "500m", "4Gi") under `key`, its error at the key's line.
  const auto quantity = [&node](const char* key, Result<int64_t> (*parse)(std::string_view),
                                int64_t* out) -> Status {
    if (!node.Has(key)) return Status::Ok();
    REEL_ASSIGN_OR_RETURN(ConfigNode value, node.Child(key));
    REEL_ASSIGN_OR_RETURN(std::string text, value.AsString());
    Result<int64_t> parsed = parse(text);
    if (!parsed.ok()) return value.Error(parsed.status().message());
    *out = *parsed;
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(quantity("cpu", ParseCpuMillicores, &r.cpu_millis));
  REEL_RETURN_IF_ERROR(quantity("memory", ParseMemoryBytes, &r.memory_bytes));
  REEL_ASSIGN_OR_RETURN(r.gpu, node.GetInt("gpu", defaults.gpu));
  if (r.gpu < 0) return node.Error("gpu must be 0 or more");
  return r;
}

}  // namespace internal
}  // namespace reel::sched
