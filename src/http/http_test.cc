// A real server on 127.0.0.1 (port 0) and the real Client: routing, JSON, errors both ways,
// limits, keep-alive, auth, a throwing handler, timeouts, concurrency.
#include "http/http.h"

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "http/testing/server_fixture.h"
#include "testing/status_matchers.h"

namespace reel::http {
namespace {

using testing::RawConnection;

class HttpTest : public testing::ServerTest {};

// Echoes what the handler saw, for the tests to check from the client's side.
Response Echo(const Request& r) {
  nlohmann::json params = r.params;
  nlohmann::json query = r.query;
  return Response::Json(200, {{"method", r.method},
                              {"path", r.path},
                              {"params", params},
                              {"query", query},
                              {"body", r.body},
                              {"content_type", r.Header("content-type")},
                              {"peer", r.peer}});
}

Router EchoRouter() {
  Router router;
  for (const char* method : {"GET", "POST", "PUT", "DELETE"}) {
    REEL_CHECK(router.Add(method, "/echo", Echo).ok());
  }
  REEL_CHECK(router.Add("POST", "/v2/models/{model}/versions/{version}/infer", Echo).ok());
  return router;
}

TEST_F(HttpTest, RoutesWithParamsAndQuery) {
  Server& server = StartServer(EchoRouter());
  Client client = MakeClient(server);
  nlohmann::json request = {{"inputs", {1, 2, 3}}};
  ASSERT_OK_AND_ASSIGN(
      nlohmann::json got,
      client.JsonCall("POST", "/v2/models/r3d%2018/versions/2/infer?timeout=5&x=a+b", &request));
  EXPECT_EQ(got["method"], "POST");
  EXPECT_EQ(got["path"], "/v2/models/r3d%2018/versions/2/infer");
  EXPECT_EQ(got["params"], nlohmann::json({{"model", "r3d 18"}, {"version", "2"}}));
  EXPECT_EQ(got["query"], nlohmann::json({{"timeout", "5"}, {"x", "a b"}}));
  EXPECT_EQ(got["content_type"], "application/json");
  EXPECT_EQ(got["body"], request.dump());
  EXPECT_EQ(got["peer"].get<std::string>().rfind("127.0.0.1:", 0), 0u);
}

TEST_F(HttpTest, NotFoundAndMethodNotAllowed) {
  Server& server = StartServer(EchoRouter());
  Client client = MakeClient(server);
  ASSERT_OK_AND_ASSIGN(Response missing, client.Get("/nowhere"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_STATUS(client.JsonCall("GET", "/nowhere", nullptr), StatusCode::kNotFound);

  ASSERT_OK_AND_ASSIGN(Response patch, client.Send("PATCH", "/echo"));
  EXPECT_EQ(patch.status, 405);
  EXPECT_EQ(patch.Header("Allow"), "DELETE, GET, HEAD, POST, PUT");

  ASSERT_OK_AND_ASSIGN(Response head, client.Send("HEAD", "/echo"));  // GET's headers only
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_NE(head.Header("Content-Length"), "0");
  ASSERT_OK_AND_ASSIGN(Response after, client.Get("/echo"));  // the connection is still in sync
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST_F(HttpTest, JsonRoundTrip) {
  Router router;
  ASSERT_OK(router.Add("PUT", "/models/{name}", [](const Request& r) {
    Result<nlohmann::json> body = ParseJson(r.body, "request");
    if (!body.ok()) return Response::Error(InvalidArgumentError(body.status().message()));
    nlohmann::json out = *body;
    out["name"] = r.params.at("name");
    return Response::Json(201, out);
  }));
  Server& server = StartServer(std::move(router));
  Client client = MakeClient(server);
  nlohmann::json in = {{"labels", {"MoveLeft", "Grow"}}, {"top1", 0.93}, {"note", "fünf ✓"}};
  ASSERT_OK_AND_ASSIGN(nlohmann::json out, client.JsonCall("PUT", "/models/r2plus1d", &in));
  in["name"] = "r2plus1d";
  EXPECT_EQ(out, in);

  ASSERT_OK_AND_ASSIGN(Response bad, client.Put("/models/x", "{not json"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_STATUS(client.JsonCall("PUT", "/models/x", nullptr), StatusCode::kInvalidArgument);
}

TEST_F(HttpTest, ErrorsTravelBothWays) {
  Router router;
  ASSERT_OK(router.Add("GET", "/fail/{code}", [](const Request& r) {
    const std::string& name = r.params.at("code");
    if (name == "Unauthenticated") return Response::Error(UnauthenticatedError("who are you"));
    return Response::Error(Status(*StatusCodeFromName(name), "failed with " + name));
  }));
  Server& server = StartServer(std::move(router));
  Client client = MakeClient(server);
  const std::vector<std::pair<std::string, int>> cases = {
      {"NotFound", 404},          {"InvalidArgument", 400},    {"AlreadyExists", 409},
      {"PermissionDenied", 403},  {"FailedPrecondition", 412}, {"Unavailable", 503},
      {"ResourceExhausted", 429}, {"DeadlineExceeded", 504},   {"DataLoss", 500},
      {"Internal", 500},
  };
  for (const auto& [name, http_status] : cases) {
    ASSERT_OK_AND_ASSIGN(Response raw, client.Get("/fail/" + name));
    EXPECT_EQ(raw.status, http_status) << name;
    Result<nlohmann::json> got = client.JsonCall("GET", "/fail/" + name, nullptr);
    EXPECT_EQ(got.status(), Status(*StatusCodeFromName(name), "failed with " + name));
  }
  ASSERT_OK_AND_ASSIGN(Response raw, client.Get("/fail/Unauthenticated"));
  EXPECT_EQ(raw.status, 401);
  EXPECT_EQ(client.JsonCall("GET", "/fail/Unauthenticated", nullptr).status(),
            UnauthenticatedError("who are you"));
}

TEST_F(HttpTest, BodyOverTheLimitIs413AndTheServerKeepsServing) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  Server& server = StartServer(EchoRouter(), options);
  Client client = MakeClient(server);
  ASSERT_OK_AND_ASSIGN(Response at_limit, client.Post("/echo", std::string(1024, 'a')));
  EXPECT_EQ(at_limit.status, 200);
  ASSERT_OK_AND_ASSIGN(Response over, client.Post("/echo", std::string(4096, 'a')));
  EXPECT_EQ(over.status, 413);
  EXPECT_STATUS(StatusFromResponse(over, "POST"), StatusCode::kResourceExhausted);
  // Far more than the socket buffers hold: the server reads and drops the rest of the body
  // before closing, so the client gets to read the 413 instead of a reset.
  ASSERT_OK_AND_ASSIGN(Response huge, client.Post("/echo", std::string(16 << 20, 'b')));
  EXPECT_EQ(huge.status, 413);
  ASSERT_OK_AND_ASSIGN(Response next, client.Post("/echo", "small"));  // on a new connection
  EXPECT_EQ(next.status, 200);
  Client other = MakeClient(server);
  ASSERT_OK_AND_ASSIGN(Response fresh, other.Get("/echo"));
  EXPECT_EQ(fresh.status, 200);
}

TEST_F(HttpTest, BodiesOfKnownLengthHaveRoomToReadPastTheirEnd) {
  Router router;
  REEL_CHECK(router
                 .Add("POST", "/room",
                      [](const Request& r) {
                        return Response::Text(200,
                                              std::to_string(r.body.capacity() - r.body.size()));
                      })
                 .ok());
  Server& server = StartServer(std::move(router));
  Client client = MakeClient(server);
  for (size_t size : {size_t{1}, size_t{5000}, size_t{3} << 20}) {
    ASSERT_OK_AND_ASSIGN(Response answer, client.Post("/room", std::string(size, 'x')));
    ASSERT_EQ(answer.status, 200);
    EXPECT_GE(std::stoul(answer.body), kBodyReadAhead) << size;
  }
}

TEST_F(HttpTest, HeadersOverTheLimitAre431) {
  ServerOptions options;
  options.max_header_bytes = 4096;
  Server& server = StartServer(EchoRouter(), options);
  ClientOptions big;
  big.headers["X-Padding"] = std::string(8192, 'p');
  Client client = MakeClient(server, big);
  ASSERT_OK_AND_ASSIGN(Response r, client.Get("/echo"));
  EXPECT_EQ(r.status, 431);
  Client plain = MakeClient(server);
  ASSERT_OK_AND_ASSIGN(Response ok, plain.Get("/echo"));
  EXPECT_EQ(ok.status, 200);
}

TEST_F(HttpTest, KeepAliveReusesOneConnectionAndConnectionCloseIsHonoured) {
  Server& server = StartServer(EchoRouter());
  Client client = MakeClient(server);
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(Response r, client.Get("/echo?i=" + std::to_string(i)));
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(server.stats().connections_accepted, 1u);
  EXPECT_EQ(server.stats().requests, 5u);

  ClientOptions closing;
  closing.headers["Connection"] = "close";
  Client once = MakeClient(server, closing);
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(Response r, once.Get("/echo"));
    EXPECT_EQ(r.Header("Connection"), "close");
  }
  EXPECT_EQ(once.connections_opened(), 2u);
  EXPECT_EQ(server.stats().connections_accepted, 3u);
}

TEST_F(HttpTest, PipelinedRequestsAreAnsweredInOrder) {
  Router router;
  ASSERT_OK(router.Add("GET", "/n/{n}", [](const Request& r) {
    return Response::Text(200, "answer-" + r.params.at("n"));
  }));
  Server& server = StartServer(std::move(router));
  RawConnection raw(server.port());
  raw.Write(
      "GET /n/1 HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /n/2 HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /n/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string got = raw.ReadUntil();  // the server closes after the third
  const size_t one = got.find("answer-1"), two = got.find("answer-2"), three = got.find("answer-3");
  ASSERT_NE(three, std::string::npos) << got;
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
  EXPECT_EQ(server.stats().connections_accepted, 1u);
}

TEST_F(HttpTest, AnswersExpectContinueAndMalformedRequests) {
  Server& server = StartServer(EchoRouter());
  RawConnection raw(server.port());
  raw.Write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_NE(raw.ReadUntil("\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  raw.Write("hello world");
  EXPECT_NE(raw.ReadUntil("hello world").find("\"body\":\"hello world\""), std::string::npos);

  RawConnection garbage(server.port());
  garbage.Write("NOT HTTP AT ALL\r\n\r\n");
  EXPECT_NE(garbage.ReadUntil().find("HTTP/1.1 400"), std::string::npos);
}

TEST_F(HttpTest, AuthHookRequiresTheRightBearerToken) {
  ServerOptions options;
  options.auth = BearerAuth({HashToken("s3cret")});
  Server& server = StartServer(EchoRouter(), options);

  Client anonymous = MakeClient(server);
  ASSERT_OK_AND_ASSIGN(Response none, anonymous.Get("/echo"));
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.Header("WWW-Authenticate"), "Bearer");
  Result<nlohmann::json> refused = anonymous.JsonCall("GET", "/echo", nullptr);
  EXPECT_TRUE(IsUnauthenticated(refused.status())) << refused.status().ToString();
  ASSERT_OK_AND_ASSIGN(Response unknown_path, anonymous.Get("/nowhere"));  // no probing
  EXPECT_EQ(unknown_path.status, 401);

  ClientOptions wrong;
  wrong.bearer_token = "guess";
  Client guesser = MakeClient(server, wrong);
  ASSERT_OK_AND_ASSIGN(Response bad, guesser.Get("/echo"));
  EXPECT_EQ(bad.status, 401);

  ClientOptions right;
  right.bearer_token = "s3cret";
  Client user = MakeClient(server, right);
  ASSERT_OK_AND_ASSIGN(Response good, user.Get("/echo"));
  EXPECT_EQ(good.status, 200);
}

TEST_F(HttpTest, AHandlerThatThrowsIs500AndTheServerLives) {
  Router router = EchoRouter();
  ASSERT_OK(router.Add("GET", "/bug",
                       [](const Request&) -> Response { throw std::runtime_error("a bug"); }));
  ASSERT_OK(router.Add("GET", "/worse", [](const Request&) -> Response { throw 42; }));
  Server& server = StartServer(std::move(router));
  Client client = MakeClient(server);
  ASSERT_OK_AND_ASSIGN(Response bug, client.Get("/bug"));
  EXPECT_EQ(bug.status, 500);
  EXPECT_STATUS(client.JsonCall("GET", "/bug", nullptr), StatusCode::kInternal);
  ASSERT_OK_AND_ASSIGN(Response worse, client.Get("/worse"));
  EXPECT_EQ(worse.status, 500);
  ASSERT_OK_AND_ASSIGN(Response fine, client.Get("/echo"));
  EXPECT_EQ(fine.status, 200);
  EXPECT_EQ(client.connections_opened(), 1u);  // not even the connection was lost
}

class HttpPoolTest : public HttpTest, public ::testing::WithParamInterface<int> {};

// On the io threads (0) and on a handler pool (3 threads): every answer reaches its own client.
TEST_P(HttpPoolTest, ConcurrentClientsFromSeveralThreads) {
  ServerOptions options;
  options.threads = 2;
  options.handler_threads = GetParam();
  Server& server = StartServer(EchoRouter(), options);
  constexpr int kThreads = 8, kCalls = 25;
  std::vector<std::future<int>> done;
  for (int t = 0; t < kThreads; ++t) {
    done.push_back(std::async(std::launch::async, [&server, t] {
      Client client = MakeClient(server);
      int good = 0;
      for (int i = 0; i < kCalls; ++i) {
        const std::string body = "thread " + std::to_string(t) + " call " + std::to_string(i);
        Result<Response> r = client.Post("/echo", body, "text/plain");
        if (!r.ok() || r->status != 200) continue;
        Result<nlohmann::json> echo = ParseJson(r->body, "echo");
        good += echo.ok() && (*echo)["body"] == body ? 1 : 0;
      }
      return good;
    }));
  }
  int good = 0;
  for (auto& f : done) good += f.get();
  EXPECT_EQ(good, kThreads * kCalls);
  EXPECT_EQ(server.stats().requests, static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_EQ(server.stats().connections_accepted, static_cast<uint64_t>(kThreads));
}

INSTANTIATE_TEST_SUITE_P(HandlerThreads, HttpPoolTest, ::testing::Values(0, 3));

}  // namespace
}  // namespace reel::http
