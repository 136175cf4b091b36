#include "sched/pipeline.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::sched {
namespace {

using std::chrono::milliseconds;

constexpr char kMain[] = R"(name: main
inputs:
  raw: ./videos
  epochs: "3"
tasks:
  - name: ingest
    command: [reel, ingest, "{{inputs.raw}}", "{{outputs.dataset}}"]
    resources: {cpu: 2, memory: 4Gi}
    retries: 2
    timeout: 30m
  - name: train
    depends_on: [ingest]
    command: [reel, train, --set, "data.dataset={{tasks.ingest.outputs.dataset}}",
              --set, "epochs={{inputs.epochs}}", --set, "run_dir={{outputs.run}}"]
    resources: {cpu: 2, memory: 8Gi, gpu: 0}
  - name: eval
    command: [reel, eval, "{{tasks.train.outputs.run}}"]
)";

// The message of a parse that must fail.
std::string ErrorOf(std::string_view yaml, const std::map<std::string, std::string>& inputs = {}) {
  Result<Pipeline> p = ParsePipeline(yaml, "p.yaml", inputs);
  EXPECT_STATUS(p, StatusCode::kInvalidArgument);
  return p.ok() ? "" : std::string(p.status().message());
}

TEST(PipelineTest, ReadsTasksResourcesAndImpliedDependencies) {
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(kMain, "main.yaml"));
  EXPECT_EQ(p.name, "main");
  ASSERT_EQ(p.tasks.size(), 3u);
  const Task& ingest = p.tasks[0];
  EXPECT_EQ(ingest.resources.cpu_millis, 2000);
  EXPECT_EQ(ingest.resources.memory_bytes, int64_t{4} << 30);
  EXPECT_EQ(ingest.retries, 2);
  EXPECT_EQ(ingest.timeout, milliseconds(30 * 60000));
  EXPECT_EQ(ingest.outputs, std::vector<std::string>{"dataset"});
  EXPECT_EQ(p.tasks[1].depends_on, std::vector<std::string>{"ingest"});
  EXPECT_EQ(p.tasks[1].outputs, std::vector<std::string>{"run"});
  // eval names no depends_on: reading train's output makes it depend on train.
  EXPECT_EQ(p.tasks[2].depends_on, std::vector<std::string>{"train"});
  EXPECT_EQ(p.tasks[2].resources.cpu_millis, 1000);  // the default request
  EXPECT_EQ(p.inputs.at("raw"), "./videos");
  EXPECT_EQ(p.source, kMain);
}

TEST(PipelineTest, InputsAreOverriddenAndChecked) {
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(kMain, "main.yaml", {{"raw", "/data/v"}}));
  EXPECT_EQ(p.inputs.at("raw"), "/data/v");
  EXPECT_NE(ErrorOf(kMain, {{"rw", "x"}}).find("no input 'rw' (the file's inputs: epochs, raw)"),
            std::string::npos);
  const std::string needs = "name: p\ninputs: {raw: null}\ntasks:\n  - {name: a, command: [x]}\n";
  EXPECT_NE(ErrorOf(needs).find("input 'raw' has no value: pass --input raw=VALUE"),
            std::string::npos);
  EXPECT_OK(ParsePipeline(needs, "p.yaml", {{"raw", "v"}}));
}

TEST(PipelineTest, ErrorsNameFileLineAndKey) {
  const std::string unknown_dep =
      "name: p\ntasks:\n  - name: a\n    command: [x]\n    depends_on: [b]\n";
  EXPECT_EQ(ErrorOf(unknown_dep),
            "p.yaml:3:5: key 'tasks[0]': depends_on names an unknown task 'b'");
  const std::string typo = "name: p\ntasks:\n  - name: a\n    comand: [x]\n";
  EXPECT_NE(ErrorOf(typo).find("p.yaml:4:5: unknown key 'tasks[0].comand' (expected one of: name, "
                               "command,"),
            std::string::npos);
  const std::string memory =
      "name: p\ntasks:\n  - name: a\n    command: [x]\n    resources: {memory: 4GB}\n";
  EXPECT_NE(ErrorOf(memory).find("p.yaml:5:25: key 'tasks[0].resources.memory': memory '4GB'"),
            std::string::npos);
  const std::string timeout = "name: p\ntasks:\n  - name: a\n    command: [x]\n    timeout: soon\n";
  EXPECT_NE(ErrorOf(timeout).find("key 'tasks[0].timeout': duration 'soon'"), std::string::npos);
  const std::string dup =
      "name: p\ntasks:\n  - {name: a, command: [x]}\n  - {name: a, command: [y]}\n";
  EXPECT_NE(ErrorOf(dup).find("p.yaml:4:5: key 'tasks[1]': a second task named 'a'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("name: p\ntasks: []\n").find("at least one task"), std::string::npos);
  EXPECT_NE(ErrorOf("name: a/b\ntasks:\n  - {name: a, command: [x]}\n").find("pipeline name"),
            std::string::npos);
  EXPECT_NE(ErrorOf("name: p\ntasks:\n  - {name: a, command: []}\n").find("at least the program"),
            std::string::npos);
  EXPECT_NE(ErrorOf("name: p\ntasks:\n  - {name: a, command: [x], retries: -1}\n").find("retries"),
            std::string::npos);
  EXPECT_STATUS(ParsePipeline("name: [unclosed", "p.yaml"), StatusCode::kInvalidArgument);
}

TEST(PipelineTest, ReferencesAreChecked) {
  const auto with = [](const std::string& arg) {
    return "name: p\ntasks:\n  - {name: a, command: [x, \"{{outputs.o}}\"]}\n"
           "  - {name: b, command: [x, \"" +
           arg + "\"]}\n";
  };
  EXPECT_OK(ParsePipeline(with("{{tasks.a.outputs.o}}"), "p.yaml"));
  EXPECT_OK(ParsePipeline(with("{{ run.id }}"), "p.yaml"));
  EXPECT_NE(ErrorOf(with("{{tasks.a.outputs.other}}")).find("task 'a' has no output 'other'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(with("{{tasks.z.outputs.o}}")).find("unknown task in {{tasks.z.outputs.o}}"),
            std::string::npos);
  EXPECT_NE(ErrorOf(with("{{inputs.nope}}")).find("unknown input"), std::string::npos);
  EXPECT_NE(ErrorOf(with("{{item}}")).find("outside a for_each task"), std::string::npos);
  EXPECT_NE(ErrorOf(with("{{whatever}}")).find("unknown reference {{whatever}}"),
            std::string::npos);
  EXPECT_NE(ErrorOf(with("{{outputs.o")).find("unclosed"), std::string::npos);
}

TEST(PipelineTest, ACycleIsRefusedNamingItsTasks) {
  const std::string cycle =
      "name: p\ntasks:\n"
      "  - {name: start, command: [x]}\n"
      "  - {name: a, command: [x], depends_on: [start, c]}\n"
      "  - {name: b, command: [x], depends_on: [a]}\n"
      "  - {name: c, command: [x], depends_on: [b]}\n";
  EXPECT_EQ(ErrorOf(cycle), "the pipeline's dependencies form a cycle: a -> c -> b -> a");
  EXPECT_NE(ErrorOf("name: p\ntasks:\n  - {name: a, command: [x], depends_on: [a]}\n")
                .find("cannot depend on itself"),
            std::string::npos);
}

TEST(PipelineTest, TopologicalOrderKeepsFileOrderAmongReadyTasks) {
  const std::string yaml =
      "name: p\ntasks:\n"
      "  - {name: d, command: [x], depends_on: [b, c]}\n"
      "  - {name: c, command: [x], depends_on: [a]}\n"
      "  - {name: b, command: [x]}\n"
      "  - {name: a, command: [x]}\n";
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(yaml, "p.yaml"));
  ASSERT_OK_AND_ASSIGN(std::vector<size_t> order, TopologicalOrder(p.tasks));
  std::vector<std::string> names;
  for (size_t i : order) names.push_back(p.tasks[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "a", "c", "d"}));
}

TEST(PipelineTest, FanOutExpandsTasksAndTheirDependents) {
  const std::string yaml =
      "name: p\ninputs: {sources: \"s3://a, s3://b,s3://c\"}\ntasks:\n"
      "  - name: ingest\n    for_each: \"{{inputs.sources}}\"\n"
      "    command: [reel, ingest, \"{{item}}\", \"{{outputs.dataset}}\"]\n"
      "  - name: merge\n    command: [x, \"{{tasks.ingest.outputs.dataset}}\"]\n"
      "  - name: each\n    for_each: [1, 2]\n    depends_on: [merge]\n    command: [x, "
      "\"{{item}}\"]\n";
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(yaml, "p.yaml"));
  ASSERT_EQ(p.tasks.size(), 6u);
  EXPECT_EQ(p.tasks[0].name, "ingest.0");
  EXPECT_EQ(p.tasks[0].item, "s3://a");
  EXPECT_EQ(p.tasks[2].item, "s3://c");
  EXPECT_EQ(p.tasks[3].depends_on, (std::vector<std::string>{"ingest.0", "ingest.1", "ingest.2"}));
  EXPECT_EQ(p.tasks[5].name, "each.1");
  EXPECT_EQ(p.tasks[5].depends_on, std::vector<std::string>{"merge"});
  // A fanned-out task's outputs reach a dependent joined by commas.
  std::map<std::string, std::map<std::string, std::string>> outs = {
      {"ingest.0", {{"dataset", "/o/0"}}},
      {"ingest.1", {{"dataset", "/o/1"}}},
      {"ingest.2", {{"dataset", "/o/2"}}}};
  TemplateValues values;
  values.task_outputs = &outs;
  ASSERT_OK_AND_ASSIGN(std::string merged, Render(p.tasks[3].command[1], p.tasks[3], p, values));
  EXPECT_EQ(merged, "/o/0,/o/1,/o/2");
}

TEST(PipelineTest, RenderFillsEveryKindOfReference) {
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(kMain, "main.yaml"));
  std::map<std::string, std::map<std::string, std::string>> outs = {
      {"ingest", {{"dataset", "/a/ds"}}}};
  TemplateValues values;
  values.inputs = &p.inputs;
  values.task_outputs = &outs;
  values.own_outputs = {{"run", "/a/run"}};
  values.run_id = "main-1";
  const Task& train = p.tasks[1];
  std::vector<std::string> rendered;
  for (const std::string& arg : train.command) {
    ASSERT_OK_AND_ASSIGN(std::string r, Render(arg, train, p, values));
    rendered.push_back(r);
  }
  EXPECT_EQ(rendered, (std::vector<std::string>{"reel", "train", "--set", "data.dataset=/a/ds",
                                                "--set", "epochs=3", "--set", "run_dir=/a/run"}));
  values.own_outputs.clear();
  EXPECT_STATUS(Render(train.command[7], train, p, values), StatusCode::kInvalidArgument);
}

TEST(PipelineTest, BackoffGrowsToItsLimit) {
  const std::string yaml =
      "name: p\ntasks:\n  - name: a\n    command: [x]\n    retries: 5\n"
      "    backoff: {duration: 2s, factor: 3, max: 30s}\n  - {name: b, command: [x]}\n";
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(yaml, "p.yaml"));
  const Task& a = p.tasks[0];
  EXPECT_EQ(a.BackoffAfter(1), milliseconds(2000));
  EXPECT_EQ(a.BackoffAfter(2), milliseconds(6000));
  EXPECT_EQ(a.BackoffAfter(3), milliseconds(18000));
  EXPECT_EQ(a.BackoffAfter(4), milliseconds(30000));
  EXPECT_EQ(p.tasks[1].BackoffAfter(1), milliseconds(1000));  // 1s doubling by default
  EXPECT_EQ(p.tasks[1].BackoffAfter(3), milliseconds(4000));
}

TEST(PipelineTest, HooksAreCommandsOrUrls) {
  const std::string yaml =
      "name: p\non_failure: [notify, --loud]\non_success: http://127.0.0.1:9/done\n"
      "ttl_after_finished: 1h\ntasks:\n  - {name: a, command: [x]}\n";
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(yaml, "p.yaml"));
  EXPECT_EQ(p.on_failure.command, (std::vector<std::string>{"notify", "--loud"}));
  EXPECT_EQ(p.on_success.url, "http://127.0.0.1:9/done");
  EXPECT_EQ(p.ttl_after_finished, milliseconds(3600000));
  EXPECT_NE(ErrorOf("name: p\non_success: mail me\ntasks:\n  - {name: a, command: [x]}\n")
                .find("http:// URL"),
            std::string::npos);
}

}  // namespace
}  // namespace reel::sched
