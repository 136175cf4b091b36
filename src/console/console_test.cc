// The console's API over a real server: who sees what, runs and models as the files and the
// registry hold them, an alias move, a pipeline's DAG, the page's assets.
#include "console/console.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "http/client.h"
#include "http/server.h"
#include "registry/access.h"
#include "registry/registry_test_util.h"
#include "registry/service.h"
#include "sched/run_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::console {
namespace {

using ::testing::HasSubstr;

class ConsoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path();
    WriteRun();
    FillRegistry();
    FillPipelines();
    ConsoleOptions o;
    o.runs = root_ + "/runs";
    o.datasets = {root_};
    o.registry = root_ + "/registry";
    o.pipelines = root_ + "/pipelines";
    ASSERT_OK_AND_ASSIGN(console_, Console::Open(o));
    http::Router router;
    ASSERT_OK(console_->AddRoutes(&router));
    ASSERT_OK_AND_ASSIGN(server_, http::Server::Start({}, std::move(router)));
  }

  void WriteRun() {
    std::filesystem::create_directories(root_ + "/runs/exp/a");
    std::ofstream m(root_ + "/runs/exp/a/metrics.jsonl");
    for (int step = 1; step <= 30; ++step) {
      m << R"({"step":)" << step << R"(,"epoch":0,"loss":)" << 3.0 - step * 0.05
        << R"(,"lr":0.01,"time":)" << 100 + step << "}\n";
    }
    m << R"({"event":"final_eval","epoch":0,"top1":0.75,"top5":1,"class_names":["x","y"],)"
         R"("confusion":[[3,1],[0,4]],"predictions":[{"video":"v1","label":0,"predicted":1},)"
         R"({"video":"v2","label":1,"predicted":1}]})"
      << "\n";
    std::ofstream(root_ + "/runs/exp/a/config.yaml") << "seed: 7\n";
  }

  void FillRegistry() {
    ASSERT_OK_AND_ASSIGN(auto reg, registry::Registry::Open(root_ + "/registry"));
    for (int i = 0; i < 2; ++i) {
      registry::NewVersion v;
      v.model = "clf";
      v.weights = registry::Model(1);
      if (i == 1) {
        v.weights.tensors["fc.weight"] = registry::Moved(v.weights.tensors["fc.weight"], 0.1, 3);
        v.parents = {{"clf", 1}};
      }
      v.dataset_uri = "/data/ds";
      if (i == 0) v.recipe = {{"op", "train"}, {"source", "/runs/exp/a"}};
      v.metrics = {{"top1", 0.5 + 0.25 * i}};
      ASSERT_OK(reg->Register(v, registry::kRoot).status());
    }
    ASSERT_OK(reg->SetAlias("clf", "production", 1, registry::kRoot));
    ASSERT_OK(reg->SetAlias("clf", "locked", 1, registry::kRoot, true));
    ASSERT_OK_AND_ASSIGN(auto access, registry::AccessControl::Open(root_ + "/registry"));
    ASSERT_OK_AND_ASSIGN(reader_, access->AddUser("rita", false));
    ASSERT_OK(access->Grant("rita", "*", registry::Role::kReader));
    ASSERT_OK_AND_ASSIGN(writer_, access->AddUser("wes", false));
    ASSERT_OK(access->Grant("wes", "*", registry::Role::kWriter));
    ASSERT_OK_AND_ASSIGN(outsider_, access->AddUser("otto", false));
    ASSERT_OK(access->Grant("otto", "other", registry::Role::kAdmin));
  }

  void FillPipelines() {
    ASSERT_OK_AND_ASSIGN(auto store, sched::RunStore::Open(root_ + "/pipelines"));
    sched::RunRecord run;
    run.pipeline = "demo";
    run.source_name = "demo.yaml";
    run.source =
        "name: demo\ntasks:\n  - name: a\n    command: [true]\n  - name: b\n    command: [false]\n"
        "    depends_on: [a]\n";
    run.state = sched::RunState::kFailed;
    run.failed_task = "b";
    ASSERT_OK_AND_ASSIGN(run_id_, store->CreateRun(run, {"a", "b"}));
    sched::TaskRecord b;
    b.name = "b";
    b.state = sched::TaskState::kFailed;
    b.attempts = 2;
    b.started_ms = 1000;
    b.finished_ms = 3500;
    ASSERT_OK(store->UpdateTask(run_id_, b));
    std::filesystem::create_directories(
        std::filesystem::path(store->LogPath(run_id_, "b")).parent_path());
    std::ofstream(store->LogPath(run_id_, "b")) << "boom: exit 1\n";
  }

  Result<http::Response> Call(const std::string& token, const std::string& method,
                              const std::string& target, const std::string& body = "") {
    http::ClientOptions o;
    o.bearer_token = token;
    REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(server_->url(), o));
    return client.Send(method, target, body, body.empty() ? "" : "application/json");
  }

  nlohmann::json Json(const std::string& token, const std::string& target) {
    Result<http::Response> r = Call(token, "GET", target);
    EXPECT_OK(r.status());
    if (!r.ok()) return {};
    EXPECT_EQ(r->status, 200) << target << ": " << r->body;
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  testing::TempDir dir_;
  std::string root_, reader_, writer_, outsider_, run_id_;
  std::unique_ptr<Console> console_;
  std::unique_ptr<http::Server> server_;
};

TEST_F(ConsoleTest, NoTokenIsUnauthorizedAndAWrongRoleIsForbidden) {
  ASSERT_OK_AND_ASSIGN(http::Response health, Call("", "GET", "/ui/api/health"));
  EXPECT_EQ(health.status, 200);
  for (const char* path :
       {"/ui/api/runs", "/ui/api/models", "/ui/api/pipelines", "/ui/api/whoami"}) {
    ASSERT_OK_AND_ASSIGN(http::Response none, Call("", "GET", path));
    EXPECT_EQ(none.status, 401) << path;
    ASSERT_OK_AND_ASSIGN(http::Response wrong, Call("reel_wrong", "GET", path));
    EXPECT_EQ(wrong.status, 401) << path;
  }
  // otto may only see model "other": no runs, no pipelines, no clf.
  for (const char* path : {"/ui/api/runs", "/ui/api/pipelines", "/ui/api/models/clf",
                           "/ui/api/models/clf/lineage", "/ui/api/serving"}) {
    ASSERT_OK_AND_ASSIGN(http::Response r, Call(outsider_, "GET", path));
    EXPECT_EQ(r.status, 403) << path << ": " << r.body;
  }
  EXPECT_TRUE(Json(outsider_, "/ui/api/models")["models"].empty());
  EXPECT_EQ(Json(reader_, "/ui/api/whoami")["role"], "reader");
}

TEST_F(ConsoleTest, RunsAreListedWithTheirLastFiguresAndSeries) {
  const nlohmann::json runs = Json(reader_, "/ui/api/runs")["runs"];
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["name"], "exp/a");
  EXPECT_EQ(runs[0]["last_step"], 30);
  EXPECT_NEAR(runs[0]["loss"].get<double>(), 1.5, 1e-9);
  EXPECT_EQ(runs[0]["top1"], 0.75);
  EXPECT_TRUE(runs[0]["finished"].get<bool>());
  EXPECT_FALSE(runs[0]["live"].get<bool>());

  const nlohmann::json m = Json(reader_, "/ui/api/runs/exp%2Fa/metrics?since=20&max_points=0");
  EXPECT_EQ(m["series"]["step"].size(), 10u);
  EXPECT_EQ(m["series"]["step"][0], 21);
  EXPECT_EQ(m["series"]["wall_s"][0], 20);
  EXPECT_TRUE(m["series"]["clips_per_s"][0].is_null());  // absent in the file
  EXPECT_EQ(m["evals"][0]["top1"], 0.75);
  const nlohmann::json thin = Json(reader_, "/ui/api/runs/exp%2Fa/metrics?max_points=12");
  EXPECT_LE(thin["series"]["step"].size(), 12u);  // thinned, keeping both ends
  EXPECT_EQ(thin["series"]["step"].front(), 1);
  EXPECT_EQ(thin["series"]["step"].back(), 30);

  const nlohmann::json eval = Json(reader_, "/ui/api/runs/exp%2Fa/eval");
  EXPECT_EQ(eval["confusion"], nlohmann::json::parse("[[3,1],[0,4]]"));
  ASSERT_EQ(eval["wrong"].size(), 1u);  // only the wrong verdicts come back
  EXPECT_EQ(eval["wrong"][0]["video"], "v1");
  EXPECT_FALSE(eval.contains("predictions"));
  EXPECT_EQ(Json(reader_, "/ui/api/runs/exp%2Fa/config")["config"], "seed: 7\n");

  ASSERT_OK_AND_ASSIGN(http::Response climb,
                       Call(reader_, "GET", "/ui/api/runs/..%2F..%2Fetc/metrics"));
  EXPECT_EQ(climb.status, 400);
  ASSERT_OK_AND_ASSIGN(http::Response none, Call(reader_, "GET", "/ui/api/runs/nope/metrics"));
  EXPECT_EQ(none.status, 404);
  ASSERT_OK_AND_ASSIGN(http::Response bad,
                       Call(reader_, "GET", "/ui/api/runs/exp%2Fa/metrics?since=x"));
  EXPECT_EQ(bad.status, 400);
}

TEST_F(ConsoleTest, ModelsShowVersionsLineageAndADiff) {
  const nlohmann::json models = Json(reader_, "/ui/api/models")["models"];
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["name"], "clf");
  const nlohmann::json model = Json(reader_, "/ui/api/models/clf");
  ASSERT_EQ(model["versions"].size(), 2u);
  EXPECT_EQ(model["versions"][0]["version"], 2);
  EXPECT_EQ(model["versions"][0]["metrics"]["top1"], 0.75);

  const nlohmann::json lineage = Json(reader_, "/ui/api/models/clf/lineage");
  EXPECT_EQ(lineage["nodes"].size(), 4u);  // two versions, their dataset, v1's run
  EXPECT_THAT(lineage["edges"].dump(),
              HasSubstr(R"({"from":"run:/runs/exp/a","kind":"run","to":"models:/clf/1"})"));
  EXPECT_THAT(lineage["edges"].dump(),
              HasSubstr(R"({"from":"models:/clf/1","kind":"parent","to":"models:/clf/2"})"));
  EXPECT_THAT(lineage["edges"].dump(),
              HasSubstr(R"({"from":"dataset:/data/ds","kind":"data","to":"models:/clf/1"})"));

  const nlohmann::json diff = Json(reader_, "/ui/api/diff?a=models:/clf/1&b=models:/clf/2");
  EXPECT_EQ(diff["counts"]["changed"], 1);
  EXPECT_EQ(diff["counts"]["unchanged"], 4);
  EXPECT_EQ(diff["metrics"][0]["key"], "top1");
}

TEST_F(ConsoleTest, OnlyAWriterMovesAnAliasAndOnlyAnAdminAProtectedOne) {
  const std::string body = R"({"version": 2})";
  ASSERT_OK_AND_ASSIGN(http::Response as_reader,
                       Call(reader_, "PUT", "/ui/api/models/clf/aliases/production", body));
  EXPECT_EQ(as_reader.status, 403);
  EXPECT_THAT(as_reader.body, HasSubstr("writer"));
  ASSERT_OK_AND_ASSIGN(http::Response as_writer,
                       Call(writer_, "PUT", "/ui/api/models/clf/aliases/production", body));
  EXPECT_EQ(as_writer.status, 200) << as_writer.body;
  ASSERT_OK_AND_ASSIGN(http::Response locked,
                       Call(writer_, "PUT", "/ui/api/models/clf/aliases/locked", body));
  EXPECT_EQ(locked.status, 403);
  ASSERT_OK_AND_ASSIGN(http::Response malformed,
                       Call(writer_, "PUT", "/ui/api/models/clf/aliases/production", "{\"v\":1}"));
  EXPECT_EQ(malformed.status, 400);
  const nlohmann::json model = Json(reader_, "/ui/api/models/clf");
  for (const auto& a : model["aliases"]) {
    EXPECT_EQ(a["version"], a["name"] == "production" ? 2 : 1) << a.dump();
  }
  EXPECT_EQ(model["alias_history"][0]["by"], "wes");
}

TEST_F(ConsoleTest, APipelineRunShowsItsDagStatesAndLogs) {
  const nlohmann::json runs = Json(reader_, "/ui/api/pipelines")["runs"];
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["state"], "failed");
  const nlohmann::json run = Json(reader_, "/ui/api/pipelines/" + run_id_);
  ASSERT_EQ(run["tasks"].size(), 2u);
  EXPECT_EQ(run["tasks"][1]["name"], "b");
  EXPECT_EQ(run["tasks"][1]["state"], "failed");
  EXPECT_EQ(run["tasks"][1]["depends_on"], nlohmann::json::parse(R"(["a"])"));
  EXPECT_EQ(run["tasks"][1]["duration_s"], 2.5);
  ASSERT_OK_AND_ASSIGN(http::Response log,
                       Call(reader_, "GET", "/ui/api/pipelines/" + run_id_ + "/logs/b"));
  EXPECT_EQ(log.body, "boom: exit 1\n");
  ASSERT_OK_AND_ASSIGN(http::Response retry,
                       Call(reader_, "POST", "/ui/api/pipelines/" + run_id_ + "/retry"));
  EXPECT_EQ(retry.status, 403);  // a reader may look, not act
  ASSERT_OK_AND_ASSIGN(http::Response cancel,
                       Call(writer_, "POST", "/ui/api/pipelines/" + run_id_ + "/cancel"));
  EXPECT_EQ(cancel.status, 412);  // it is not running
  ASSERT_OK_AND_ASSIGN(http::Response jobs, Call(reader_, "GET", "/ui/api/jobs"));
  EXPECT_EQ(jobs.status, 404);  // no scheduler configured
}

TEST_F(ConsoleTest, ThePageAndItsLibrariesAreServedFromTheBinary) {
  ASSERT_OK_AND_ASSIGN(http::Response page, Call("", "GET", "/"));
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.Header("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(page.body, HasSubstr("uPlot.iife.min.js"));
  for (const char* asset : {"/assets/app.js", "/assets/vendor/uPlot.iife.min.js",
                            "/assets/vendor/dagre.min.js", "/assets/style.css"}) {
    ASSERT_OK_AND_ASSIGN(http::Response r, Call("", "GET", asset));
    EXPECT_EQ(r.status, 200) << asset;
    EXPECT_GT(r.body.size(), 100u) << asset;
  }
}

// Against `reel registry serve`: the console asks the server who holds a token and acts with the
// caller's own token, so the server's roles decide.
TEST_F(ConsoleTest, ARegistryServerDecidesWithTheCallersToken) {
  registry::ServiceOptions service_options;
  service_options.registry_uri = root_ + "/registry";
  ASSERT_OK_AND_ASSIGN(auto service, registry::RegistryService::Open(service_options));
  http::Router registry_router;
  ASSERT_OK(service->AddRoutes(&registry_router));
  ASSERT_OK_AND_ASSIGN(auto registry_server, http::Server::Start({}, std::move(registry_router)));
  ConsoleOptions o;
  o.registry = registry_server->url();
  ASSERT_OK_AND_ASSIGN(auto console, Console::Open(o));
  http::Router router;
  ASSERT_OK(console->AddRoutes(&router));
  server_->Shutdown();
  ASSERT_OK_AND_ASSIGN(server_, http::Server::Start({}, std::move(router)));

  EXPECT_EQ(Json(reader_, "/ui/api/whoami")["user"], "rita");
  EXPECT_EQ(Json(reader_, "/ui/api/models")["models"][0]["name"], "clf");
  EXPECT_EQ(Json(reader_, "/ui/api/models/clf/lineage")["nodes"].size(), 4u);
  ASSERT_OK_AND_ASSIGN(http::Response wrong, Call("reel_nobody", "GET", "/ui/api/models"));
  EXPECT_EQ(wrong.status, 401);
  ASSERT_OK_AND_ASSIGN(
      http::Response as_reader,
      Call(reader_, "PUT", "/ui/api/models/clf/aliases/production", R"({"version": 2})"));
  EXPECT_EQ(as_reader.status, 403);
  ASSERT_OK_AND_ASSIGN(
      http::Response as_writer,
      Call(writer_, "PUT", "/ui/api/models/clf/aliases/production", R"({"version": 2})"));
  EXPECT_EQ(as_writer.status, 200) << as_writer.body;
  // The registry server recorded the writer, not the console, as the mover.
  EXPECT_EQ(Json(reader_, "/ui/api/models/clf")["alias_history"][0]["by"], "wes");
  server_->Shutdown();
}

TEST(ConsoleOpenTest, AuthWithoutARegistryIsRefused) {
  ConsoleOptions o;
  EXPECT_STATUS(Console::Open(o).status(), StatusCode::kInvalidArgument);
  EXPECT_THAT(Console::Open(o).status().message(), HasSubstr("--no-auth"));
  o.no_auth = true;
  EXPECT_OK(Console::Open(o).status());
}

}  // namespace
}  // namespace reel::console
