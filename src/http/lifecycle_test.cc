// Connections and servers coming and going: graceful shutdown with a request in flight, closed
// ports, a server closing an idle connection, client timeouts, URLs and bad options. Handlers
// block on promises the test fulfils; nothing sleeps.
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "http/http.h"
#include "http/testing/server_fixture.h"
#include "testing/status_matchers.h"
#include "testing/wait.h"

namespace reel::http {
namespace {

using namespace std::chrono_literals;
using reel::testing::WaitUntil;

class LifecycleTest : public testing::ServerTest {};

// A route whose handler says it started and then waits for the test's go.
struct Gate {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();

  Handler Handle() {
    return [this](const Request&) {
      entered.set_value();
      released.wait();
      return Response::Text(200, "done");
    };
  }
};

Router GatedRouter(Gate* gate) {
  Router router;
  REEL_CHECK(router.Add("GET", "/slow", gate->Handle()).ok());
  REEL_CHECK(
      router.Add("GET", "/fast", [](const Request&) { return Response::Text(200, "ok"); }).ok());
  return router;
}

TEST_F(LifecycleTest, ShutdownWaitsForTheRequestInFlight) {
  Gate gate;
  ServerOptions options;
  options.threads = 2;  // one stays free while the handler blocks the other
  Server& server = StartServer(GatedRouter(&gate), options);
  Client idle = MakeClient(server);
  ASSERT_OK(idle.Get("/fast"));  // leaves an idle keep-alive connection

  auto slow = std::async(std::launch::async, [&server] { return MakeClient(server).Get("/slow"); });
  gate.entered.get_future().wait();
  auto stopped = std::async(std::launch::async, [&server] { server.Shutdown(30s); });
  ASSERT_TRUE(WaitUntil([&] { return server.stats().draining; }, 10s));
  // The idle connection is closed, no new one is served, and Shutdown is still waiting.
  ASSERT_TRUE(WaitUntil([&] { return server.stats().open_connections == 1; }, 10s));
  EXPECT_STATUS(MakeClient(server).Get("/fast"), StatusCode::kUnavailable);
  EXPECT_EQ(stopped.wait_for(0s), std::future_status::timeout);

  gate.release.set_value();
  ASSERT_OK_AND_ASSIGN(Response answer, slow.get());
  EXPECT_EQ(answer.body, "done");
  EXPECT_EQ(answer.Header("Connection"), "close");
  stopped.get();
  EXPECT_EQ(server.stats().open_connections, 0u);
  EXPECT_STATUS(idle.Get("/fast"), StatusCode::kUnavailable);
}

TEST_F(LifecycleTest, AClosedPortIsUnavailableNamingTheAddress) {
  Server& server = StartServer(Router());
  const std::string address = server.address();
  server.Shutdown();
  ASSERT_OK_AND_ASSIGN(Client client, Client::Make("http://" + address));
  Result<Response> r = client.Get("/x");
  EXPECT_STATUS(r, StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find(address), std::string::npos) << r.status().ToString();
}

TEST_F(LifecycleTest, ReconnectsOnceWhenTheServerClosedAnIdleConnection) {
  ServerOptions options;
  options.idle_timeout = 50ms;
  Gate unused;
  Server& server = StartServer(GatedRouter(&unused), options);
  Client client = MakeClient(server);
  ASSERT_OK(client.Get("/fast"));
  ASSERT_TRUE(WaitUntil([&] { return server.stats().open_connections == 0; }, 10s));
  ASSERT_OK_AND_ASSIGN(Response r, client.Get("/fast"));
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(client.connections_opened(), 2u);
}

TEST_F(LifecycleTest, NoAnswerWithinTheTimeoutIsDeadlineExceeded) {
  Gate gate;
  Server& server = StartServer(GatedRouter(&gate));
  ClientOptions impatient;
  impatient.timeout = 200ms;
  Client client = MakeClient(server, impatient);
  Result<Response> r = client.Get("/slow");
  EXPECT_STATUS(r, StatusCode::kDeadlineExceeded);
  gate.entered.get_future().wait();
  gate.release.set_value();  // lets the handler finish so the server can stop
  ASSERT_OK_AND_ASSIGN(Response after, client.Get("/fast"));  // a new connection
  EXPECT_EQ(after.body, "ok");
}

TEST_F(LifecycleTest, ServerOptionsAndTakenPorts) {
  Server& first = StartServer(Router());
  ServerOptions same;
  same.port = first.port();
  EXPECT_STATUS(Server::Start(same, Router()), StatusCode::kUnavailable);
  ServerOptions no_threads;
  no_threads.threads = 0;
  EXPECT_STATUS(Server::Start(no_threads, Router()), StatusCode::kInvalidArgument);
  EXPECT_EQ(first.url(), "http://127.0.0.1:" + std::to_string(first.port()));
}

TEST_F(LifecycleTest, ClientUrlsAndPrefixes) {
  EXPECT_STATUS(Client::Make("https://example.com"), StatusCode::kUnimplemented);
  for (const char* bad : {"ftp://h", "http://", "http://h:0", "http://h:99999", "http://h:x",
                          "http://u@h", "http://h/p?q", "http://[::1"}) {
    EXPECT_STATUS(Client::Make(bad), StatusCode::kInvalidArgument) << bad;
  }
  Router router;
  ASSERT_OK(router.Add("GET", "/api/v1/ping",
                       [](const Request& r) { return Response::Text(200, r.Header("Host")); }));
  Server& server = StartServer(std::move(router));
  ASSERT_OK_AND_ASSIGN(Client client, Client::Make(server.url() + "/api/v1/"));
  EXPECT_EQ(client.base_url(), server.url() + "/api/v1");
  ASSERT_OK_AND_ASSIGN(Response r, client.Get("/ping"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, server.address());
  EXPECT_STATUS(client.Get("no-slash"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(client.Send("BAD METHOD", "/ping"), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::http
