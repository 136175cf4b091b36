// The parts of the HTTP layer that need no socket: routing, the Status <-> HTTP mapping,
// target parsing and bearer tokens.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/hash.h"
#include "base/json.h"
#include "http/http.h"
#include "testing/status_matchers.h"

namespace reel::http {
namespace {

Request Make(std::string method, std::string target) {
  Request r;
  r.method = std::move(method);
  r.target = std::move(target);
  SplitTarget(r.target, &r.path, &r.query);
  return r;
}

// A handler that answers with its own name and the captures it got.
Handler Named(std::string name) {
  return [name](const Request& r) {
    nlohmann::json params = r.params;
    return Response::Json(200, {{"route", name}, {"params", params}});
  };
}

nlohmann::json Body(const Response& r) {
  return ParseJson(r.body, "response").value_or(nlohmann::json());
}

TEST(RouterTest, CapturesSegmentsAndPrefersLiterals) {
  Router router;
  ASSERT_OK(router.Add("POST", "/v2/models/{model}/versions/{version}/infer", Named("infer")));
  ASSERT_OK(router.Add("GET", "/v2/models/{model}", Named("model")));
  ASSERT_OK(router.Add("GET", "/v2/models/ready", Named("ready")));
  ASSERT_OK(router.Add("GET", "/files/{path...}", Named("files")));
  ASSERT_OK(router.Add("GET", "/", Named("root")));

  Request infer = Make("POST", "/v2/models/res%2Fnet%20a/versions/3/infer?x=1");
  Response r = router.Dispatch(&infer);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["route"], "infer");
  EXPECT_EQ(Body(r)["params"]["model"], "res/net a");  // %2F stays inside its segment
  EXPECT_EQ(Body(r)["params"]["version"], "3");

  Request ready = Make("GET", "/v2/models/ready/");
  EXPECT_EQ(Body(router.Dispatch(&ready))["route"], "ready");
  Request model = Make("GET", "/v2/models/r3d");
  EXPECT_EQ(Body(router.Dispatch(&model))["params"]["model"], "r3d");

  Request files = Make("GET", "/files/a/b/c.txt");
  EXPECT_EQ(Body(router.Dispatch(&files))["params"]["path"], "a/b/c.txt");
  Request no_files = Make("GET", "/files");
  EXPECT_EQ(Body(router.Dispatch(&no_files))["params"]["path"], "");
  Request root = Make("GET", "/");
  EXPECT_EQ(Body(router.Dispatch(&root))["route"], "root");
}

TEST(RouterTest, NotFoundAndMethodNotAllowed) {
  Router router;
  ASSERT_OK(router.Add("GET", "/models/{m}", Named("get")));
  ASSERT_OK(router.Add("DELETE", "/models/{m}", Named("delete")));

  Request missing = Make("GET", "/models/a/b");
  Response r = router.Dispatch(&missing);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Body(r)["code"], "NotFound");

  Request post = Make("POST", "/models/a");
  r = router.Dispatch(&post);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("allow"), "DELETE, GET, HEAD");
  EXPECT_NE(Body(r)["error"].get<std::string>().find("POST"), std::string::npos);

  Request head = Make("HEAD", "/models/a");  // answered by the GET route
  EXPECT_EQ(Body(router.Dispatch(&head))["route"], "get");
}

TEST(RouterTest, RefusesMalformedAndDuplicatePatterns) {
  Router router;
  for (const char* bad :
       {"models", "/a/{", "/a/{}", "/{rest...}/b", "/a/{x}/{x}", "/a//b", "/a{b}"}) {
    EXPECT_STATUS(router.Add("GET", bad, Named("x")), StatusCode::kInvalidArgument) << bad;
  }
  ASSERT_OK(router.Add("GET", "/a/{x}", Named("x")));
  EXPECT_STATUS(router.Add("GET", "/a/{y}", Named("y")), StatusCode::kInvalidArgument);
  EXPECT_OK(router.Add("PUT", "/a/{y}", Named("y")));
  EXPECT_STATUS(router.Add("GET", "/b", nullptr), StatusCode::kInvalidArgument);
}

TEST(MessageTest, SplitsTargetsAndDecodesQueries) {
  std::string path;
  std::map<std::string, std::string> query;
  SplitTarget("/a%20b/c?x=1&y=a+b%21&flag&x=2&=&%zz=%4", &path, &query);
  EXPECT_EQ(path, "/a%20b/c");
  EXPECT_EQ(query["x"], "2");  // the last one wins
  EXPECT_EQ(query["y"], "a b!");
  EXPECT_EQ(query["flag"], "");
  EXPECT_EQ(query["%zz"], "%4");  // malformed escapes are kept
  EXPECT_EQ(PercentDecode("a+b%2f", false), "a+b/");
}

TEST(MessageTest, HeadersAreCaseInsensitive) {
  Request r;
  r.headers["Content-Type"] = "application/json";
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.Header("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(r.Header("Accept"), "");
}

TEST(MessageTest, ErrorsMapToHttpStatuses) {
  const std::vector<std::pair<Status, int>> table = {
      {NotFoundError("m"), 404},         {InvalidArgumentError("m"), 400},
      {AlreadyExistsError("m"), 409},    {PermissionDeniedError("m"), 403},
      {UnauthenticatedError("m"), 401},  {FailedPreconditionError("m"), 412},
      {UnavailableError("m"), 503},      {ResourceExhaustedError("m"), 429},
      {DeadlineExceededError("m"), 504}, {UnimplementedError("m"), 501},
      {InternalError("m"), 500},         {DataLossError("m"), 500},
      {CancelledError("m"), 500},        {OutOfRangeError("m"), 400},
  };
  for (const auto& [status, http_status] : table) {
    Response r = Response::Error(status);
    EXPECT_EQ(r.status, http_status) << status.ToString();
    EXPECT_EQ(r.Header("Content-Type"), "application/json");
    // The inverse gives back the very same Status.
    EXPECT_EQ(StatusFromResponse(r, "GET /x"), status) << status.ToString();
  }
  Response unauthenticated = Response::Error(UnauthenticatedError("a token is required"));
  EXPECT_EQ(Body(unauthenticated),
            nlohmann::json({{"error", "a token is required"}, {"code", "Unauthenticated"}}));
  EXPECT_EQ(unauthenticated.Header("WWW-Authenticate"), "Bearer");
  EXPECT_TRUE(IsUnauthenticated(UnauthenticatedError("x")));
  EXPECT_FALSE(IsUnauthenticated(PermissionDeniedError("x")));
}

TEST(MessageTest, NonJsonErrorsFallBackOnTheHttpStatus) {
  Response proxy = Response::Text(502, "<html>bad gateway</html>");
  Status s = StatusFromResponse(proxy, "GET http://h:1/x");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "GET http://h:1/x: HTTP 502: <html>bad gateway</html>");
  EXPECT_EQ(StatusFromResponse(Response::Text(404, ""), "w").code(), StatusCode::kNotFound);
  EXPECT_TRUE(IsUnauthenticated(StatusFromResponse(Response::Text(401, ""), "w")));
  EXPECT_EQ(StatusFromResponse(Response::Text(418, ""), "w").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      StatusFromResponse(Response::Json(409, {{"code", "Nonsense"}, {"error", "e"}}), "w").code(),
      StatusCode::kAlreadyExists);
  EXPECT_OK(StatusFromResponse(Response::Text(204, ""), "w"));
  EXPECT_EQ(StatusCodeFromName("DeadlineExceeded"), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusCodeFromName("Bogus"), std::nullopt);
}

TEST(MessageTest, JsonReplacesInvalidUtf8InsteadOfThrowing) {
  Response r = Response::Json(200, {{"name", std::string("a\xff")}});
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.body.empty());
}

TEST(AuthTest, ReadsBearerTokens) {
  Request r;
  EXPECT_EQ(BearerToken(r), std::nullopt);
  r.headers["Authorization"] = "Bearer abc.def";
  EXPECT_EQ(BearerToken(r), "abc.def");
  r.headers["Authorization"] = "  bearer   tok  ";
  EXPECT_EQ(BearerToken(r), "tok");
  r.headers["Authorization"] = "Basic dXNlcjpwYXNz";
  EXPECT_EQ(BearerToken(r), std::nullopt);
  r.headers["Authorization"] = "Bearer ";
  EXPECT_EQ(BearerToken(r), std::nullopt);
}

TEST(AuthTest, HashesAndComparesTokens) {
  EXPECT_EQ(HashToken("s3cret"), Sha256Hex("s3cret"));
  EXPECT_EQ(HashToken("s3cret").size(), 64u);
  EXPECT_TRUE(TokenMatchesHash("s3cret", HashToken("s3cret")));
  EXPECT_FALSE(TokenMatchesHash("s3cres", HashToken("s3cret")));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));

  auto hook = BearerAuth({HashToken("one"), HashToken("two")});
  Request r;
  EXPECT_TRUE(IsUnauthenticated(hook(r)));
  r.headers["Authorization"] = "Bearer three";
  EXPECT_TRUE(IsUnauthenticated(hook(r)));
  r.headers["Authorization"] = "Bearer two";
  EXPECT_OK(hook(r));
}

}  // namespace
}  // namespace reel::http
