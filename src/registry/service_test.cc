// `reel registry serve`'s API through the registry's HTTP client, on a real server on 127.0.0.1
// port 0 over an embedded registry in a temp folder: everything the CLI does works remotely and
// bit-exact, roles decide who may do what, and bad uploads change nothing.
#include "registry/service.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/json.h"
#include "http/client.h"
#include "http/message.h"
#include "http/server.h"
#include "registry/access.h"
#include "registry/registry_test_util.h"
#include "registry/remote.h"
#include "registry/views.h"
#include "registry/weight_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::registry {
namespace {

NewVersion ServiceVersion(const std::string& model, uint64_t seed) {
  NewVersion v;
  v.model = model;
  v.weights = Model(seed);
  v.optimizer = Model(seed + 100);
  v.architecture = {{"name", "r2plus1d"}};
  v.metrics = {{"top1", 0.5}};
  v.config = "model:\n  name: r2plus1d\n";
  v.tags = {{"team", "vision"}};
  return v;
}

class RegistryServiceTest : public ::testing::Test {
 protected:
  void Start(bool no_auth) {
    ServiceOptions options;
    options.registry_uri = dir_.path() + "/registry";
    options.no_auth = no_auth;
    ASSERT_OK_AND_ASSIGN(service_, RegistryService::Open(options));
    http::Router router;
    ASSERT_OK(service_->AddRoutes(&router));
    ASSERT_OK_AND_ASSIGN(server_, http::Server::Start({}, std::move(router)));
    ASSERT_OK_AND_ASSIGN(access_, AccessControl::Open(options.registry_uri));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<Registry> As(const std::string& token) {
    auto r = OpenRemoteRegistry(server_->url(), token);
    REEL_CHECK(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }

  // A user with `role` on `model`; returns their token.
  std::string User(const std::string& name, const std::string& model, Role role) {
    auto token = access_->AddUser(name, false);
    REEL_CHECK(token.ok()) << token.status().ToString();
    REEL_CHECK(access_->Grant(name, model, role).ok());
    return *token;
  }

  reel::testing::TempDir dir_;
  std::unique_ptr<RegistryService> service_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<AccessControl> access_;
};

TEST_F(RegistryServiceTest, EveryOperationWorksRemotelyAndPullsBitExact) {
  Start(/*no_auth=*/false);
  std::unique_ptr<Registry> reg = As(User("ada", "clf", Role::kAdmin));
  const Actor who{"ignored", false};
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(VersionInfo v1, reg->Register(ServiceVersion("clf", 1), who, &stats));
  EXPECT_EQ(v1.id.ToString(), "models:/clf/1");
  EXPECT_EQ(v1.author, "ada");  // the token's holder, not what the client claims
  EXPECT_GT(stats.chunks_written, 0);
  NewVersion tuned = ServiceVersion("clf", 1);
  tuned.weights.tensors["fc.weight"] = Moved(tuned.weights.tensors["fc.weight"], 1e-3, 3);
  tuned.parents = {v1.id};
  ASSERT_OK_AND_ASSIGN(VersionInfo v2, reg->Register(tuned, who));

  ASSERT_OK_AND_ASSIGN(VersionInfo got, reg->Get("models:/clf/2"));
  EXPECT_EQ(got.weights_id, v2.weights_id);
  EXPECT_EQ(got.tags.at("team"), "vision");
  EXPECT_EQ(got.weights.tensors.size(), tuned.weights.tensors.size());
  ASSERT_TRUE(got.optimizer.has_value());
  ASSERT_OK_AND_ASSIGN(SafetensorsFile weights, reg->PullWeights(got));
  ExpectSameFile(weights, tuned.weights);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile optimizer, reg->PullOptimizer(got));
  ExpectSameFile(optimizer, *tuned.optimizer);
  ASSERT_OK_AND_ASSIGN(auto parents, reg->Parents(v2.id));
  ASSERT_EQ(parents.size(), 1u);
  EXPECT_EQ(parents[0], v1.id);

  ASSERT_OK(reg->SetAlias("clf", "production", 1, who, /*protect=*/true));
  ASSERT_OK_AND_ASSIGN(VersionInfo prod, reg->Get("models:/clf@production"));
  EXPECT_EQ(prod.id.version, 1);
  ASSERT_OK(reg->CreateBranch("clf", "exp", 1, who));
  ASSERT_OK_AND_ASSIGN(VersionId head, reg->Resolve({"clf", ModelRef::Kind::kBranch, 0, "exp"}));
  EXPECT_EQ(head.version, 1);
  ASSERT_OK_AND_ASSIGN(auto branches, reg->ListBranches("clf"));
  EXPECT_EQ(branches.size(), 2u);
  ASSERT_OK_AND_ASSIGN(auto log, reg->Log("clf", "main"));
  EXPECT_EQ(log.size(), 2u);
  ASSERT_OK(reg->SetTag(v1.id, "stage", "gold"));
  ASSERT_OK(reg->RemoveTag(v1.id, "team"));
  ASSERT_OK_AND_ASSIGN(auto versions, reg->ListVersions("clf"));
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[1].tags, (std::map<std::string, std::string>{{"stage", "gold"}}));
  ASSERT_OK_AND_ASSIGN(auto history, reg->AliasHistory("clf"));
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].by, "ada");
  ASSERT_OK(reg->DeleteBranch("clf", "exp", who));
  ASSERT_OK(reg->RemoveAlias("clf", "production", who));
  EXPECT_STATUS(reg->Remove(v1.id, /*force=*/false, who), StatusCode::kFailedPrecondition);
  ASSERT_OK(reg->Remove(v2.id, /*force=*/true, who));
  EXPECT_STATUS(reg->Get("models:/clf/2"), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(auto models, reg->ListModels());
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].versions, 1);
}

TEST_F(RegistryServiceTest, RolesDecideWhoMayDoWhat) {
  Start(/*no_auth=*/false);
  const Actor who{"x", false};
  std::unique_ptr<Registry> writer = As(User("wes", "clf", Role::kWriter));
  std::unique_ptr<Registry> reader = As(User("rui", "clf", Role::kReader));
  std::unique_ptr<Registry> admin = As(User("ada", "*", Role::kAdmin));
  ASSERT_OK(writer->Register(ServiceVersion("clf", 1), who).status());
  ASSERT_OK(admin->Register(ServiceVersion("secret", 2), who).status());

  EXPECT_STATUS(reader->Register(ServiceVersion("clf", 3), who), StatusCode::kPermissionDenied);
  EXPECT_STATUS(writer->Register(ServiceVersion("secret", 3), who), StatusCode::kPermissionDenied);
  EXPECT_STATUS(reader->Get("models:/secret/1"), StatusCode::kPermissionDenied);
  ASSERT_OK_AND_ASSIGN(auto visible, reader->ListModels());
  ASSERT_EQ(visible.size(), 1u);  // "secret" is not listed to someone who may not read it
  EXPECT_EQ(visible[0].name, "clf");
  ASSERT_OK(reader->Get("models:/clf/1").status());

  // A protected alias: a writer may not move it, an admin may.
  ASSERT_OK(admin->SetAlias("clf", "production", 1, who, /*protect=*/true));
  ASSERT_OK(writer->Register(ServiceVersion("clf", 4), who).status());
  EXPECT_STATUS(writer->SetAlias("clf", "production", 2, who), StatusCode::kPermissionDenied);
  ASSERT_OK(writer->SetAlias("clf", "staging", 2, who));
  ASSERT_OK(admin->SetAlias("clf", "production", 2, who));
  EXPECT_STATUS(writer->Remove({"clf", 1}, true, who), StatusCode::kPermissionDenied);
  EXPECT_STATUS(admin->CollectGarbage({}, who),
                StatusCode::kPermissionDenied);  // not registry admin

  // No token, or one nobody holds: 401, which the client reads as an unauthenticated error.
  Status anonymous = As("")->ListModels().status();
  EXPECT_TRUE(http::IsUnauthenticated(anonymous)) << anonymous.ToString();
  Status forged = As("reel_forged")->ListModels().status();
  EXPECT_TRUE(http::IsUnauthenticated(forged)) << forged.ToString();
  // A rotated token stops working at once.
  ASSERT_OK_AND_ASSIGN(std::string fresh, access_->RotateToken("rui"));
  EXPECT_TRUE(http::IsUnauthenticated(reader->ListModels().status()));
  ASSERT_OK(As(fresh)->ListModels().status());
}

TEST_F(RegistryServiceTest, WithoutAuthTheCallerNamesThemselves) {
  Start(/*no_auth=*/true);
  std::unique_ptr<Registry> reg = As("");
  ASSERT_OK_AND_ASSIGN(VersionInfo v, reg->Register(ServiceVersion("clf", 1), Actor{}));
  EXPECT_EQ(v.author, Actor::Local().name);
  ASSERT_OK(reg->SetAlias("clf", "production", 1, Actor{}, /*protect=*/true));
  ASSERT_OK(reg->CollectGarbage({}, Actor{}).status());
  ASSERT_OK_AND_ASSIGN(auto users, access_->ListUsers());
  EXPECT_TRUE(users.empty());
}

TEST_F(RegistryServiceTest, BadUploadsAreRefusedAndChangeNothing) {
  Start(/*no_auth=*/true);
  ASSERT_OK_AND_ASSIGN(http::Client client, http::Client::Make(server_->url()));
  const std::string target = "/api/v1/models/clf/versions";
  // Truncated framing, a header that announces other sizes, and safetensors bytes cut short.
  std::string header = R"({"model":"clf","weights_bytes":100,"optimizer_bytes":0})";
  std::string framed(8, '\0');
  framed[0] = static_cast<char>(header.size());
  for (const std::string& body :
       {std::string("abc"), framed + header + "short", framed + header + std::string(100, 'x')}) {
    ASSERT_OK_AND_ASSIGN(http::Response r, client.Post(target, body, kRegistrationContentType));
    EXPECT_EQ(r.status, 400) << r.body;
  }
  ASSERT_OK_AND_ASSIGN(http::Response path, client.Get("/api/v1/models/a%2Fb/versions"));
  EXPECT_EQ(path.status, 400) << path.body;
  ASSERT_OK_AND_ASSIGN(http::Response version, client.Get("/api/v1/models/clf/versions/-1"));
  EXPECT_EQ(version.status, 400) << version.body;
  std::unique_ptr<Registry> reg = As("");
  ASSERT_OK_AND_ASSIGN(auto models, reg->ListModels());
  EXPECT_TRUE(models.empty());
  EXPECT_STATUS(reg->Get("models:/clf/1"), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(http::Response health, client.Get("/api/v1/health"));
  EXPECT_EQ(health.status, 200);
}

TEST_F(RegistryServiceTest, AnUploadSendsOnlyTheChunksTheStoreLacks) {
  Start(/*no_auth=*/true);
  std::unique_ptr<Registry> reg = As("");
  NewVersion first = ServiceVersion("clf", 1);
  first.optimizer.reset();
  uint64_t weight_bytes = 0;
  for (const auto& [name, t] : first.weights.tensors) weight_bytes += t.data.size();
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(VersionInfo v1, reg->Register(first, Actor{}, &stats));
  EXPECT_EQ(stats.uploaded_bytes, weight_bytes) << "a new model sends everything";

  NewVersion head_only = first;
  head_only.weights.tensors["fc.weight"] = Moved(first.weights.tensors["fc.weight"], 1e-3, 3);
  head_only.parents = {v1.id};
  ASSERT_OK_AND_ASSIGN(VersionInfo v2, reg->Register(head_only, Actor{}, &stats));
  EXPECT_EQ(stats.uploaded_bytes, head_only.weights.tensors["fc.weight"].data.size());
  EXPECT_EQ(stats.chunks_written, 1);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile pulled, reg->PullWeights(v2));
  ExpectSameFile(pulled, head_only.weights);

  NewVersion again = head_only;
  again.message = "the same weights on another branch";
  again.branch = "copy";
  ASSERT_OK(reg->Register(again, Actor{}, &stats).status());
  EXPECT_EQ(stats.uploaded_bytes, 0u);
}

TEST_F(RegistryServiceTest, AnUploadOfMissingOrWrongChunksIsRefused) {
  Start(/*no_auth=*/true);
  ASSERT_OK_AND_ASSIGN(http::Client client, http::Client::Make(server_->url()));
  ASSERT_OK_AND_ASSIGN(WeightManifest manifest, DescribeChunks(Model(5), 4 << 20));
  const std::string fc = manifest.tensors.at("fc.weight").chunks[0].sha256;
  auto post = [&](const nlohmann::json& sent, const std::string& bytes) {
    NewVersion nv;
    nv.model = "clf";
    nlohmann::json header = NewVersionJson(nv);
    header["weights_manifest"] = nlohmann::json::parse(ManifestToJson(manifest));
    header["weights_sent"] = sent;
    header["weights_bytes"] = bytes.size();
    header["optimizer_bytes"] = 0;
    const std::string json = header.dump();
    std::string body(8, '\0');
    for (int i = 0; i < 8; ++i) body[i] = static_cast<char>(json.size() >> (8 * i) & 0xff);
    auto r =
        client.Post("/api/v1/models/clf/versions", body + json + bytes, kRegistrationContentType);
    REEL_CHECK(r.ok()) << r.status().ToString();
    return http::StatusFromResponse(*r, "register");
  };
  EXPECT_STATUS(post(nlohmann::json::array(), ""), StatusCode::kFailedPrecondition)
      << "chunks neither stored nor sent";
  EXPECT_STATUS(post({fc}, std::string(8 * 16 * 4, 'x')), StatusCode::kInvalidArgument)
      << "bytes that are not the chunk they claim";
  EXPECT_STATUS(post({fc}, "x"), StatusCode::kInvalidArgument) << "bytes cut short";
  ASSERT_OK_AND_ASSIGN(http::Response bad,
                       client.Post("/api/v1/models/clf/chunks/missing", R"({"chunks": ["../x"]})",
                                   "application/json"));
  EXPECT_EQ(bad.status, 400) << bad.body;
  std::unique_ptr<Registry> reg = As("");
  EXPECT_STATUS(reg->Get("models:/clf/1"), StatusCode::kNotFound);
}

TEST_F(RegistryServiceTest, UsersAndGrantsAreKeptAsHashes) {
  Start(/*no_auth=*/false);
  ASSERT_OK_AND_ASSIGN(std::string token, access_->AddUser("ada", /*admin=*/true));
  EXPECT_EQ(token.rfind("reel_", 0), 0u);
  EXPECT_STATUS(access_->AddUser("ada", false), StatusCode::kAlreadyExists);
  EXPECT_STATUS(access_->AddUser("../x", false), StatusCode::kInvalidArgument);
  EXPECT_STATUS(access_->Grant("nobody", "clf", Role::kReader), StatusCode::kNotFound);
  EXPECT_STATUS(ParseRole("owner"), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(Principal p, access_->Authenticate(token));
  EXPECT_TRUE(p.admin);
  EXPECT_EQ(p.RoleFor("anything"), Role::kAdmin);
  ASSERT_OK(access_->RemoveUser("ada"));
  EXPECT_TRUE(http::IsUnauthenticated(access_->Authenticate(token).status()));
}

}  // namespace
}  // namespace reel::registry
