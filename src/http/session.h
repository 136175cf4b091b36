// What server.cc and session.cc share (private to http/): a Session per connection.
//
// One Session per connection, all of its work on its own strand (so a connection needs no
// lock even with several io threads). A session loops: wait for a request's first byte (idle
// timeout), read its header and body (read timeout), run auth and router, write the answer
// (write timeout). Shutdown asks every session to drain: an idle one closes at once, a busy
// one closes after the answer in flight.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/beast_util.h"
#include "http/message.h"
#include "http/router.h"
#include "http/server.h"

namespace reel::http::internal {

std::string EndpointText(const tcp::endpoint& endpoint);

class Session;

// What the server and its sessions share; sessions keep it alive.
struct Shared {
  Shared(ServerOptions o, Router r) : options(std::move(o)), router(std::move(r)) {}

  const ServerOptions options;
  const Router router;
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<bool> draining{false};
  std::mutex mu;
  std::condition_variable changed;                      // a session or a handler ended
  std::map<uint64_t, std::weak_ptr<Session>> sessions;  // guarded by mu
  uint64_t next_id = 0;                                 // guarded by mu
  // Requests in the auth hook or a handler, by session id, which nothing can interrupt: a
  // Shutdown past its deadline waits for them and names them, rather than hang without a word.
  struct Running {
    std::string what;
    Clock::time_point since;
  };
  std::map<uint64_t, Running> running;  // guarded by mu
  // Where handlers run when ServerOptions::handler_threads > 0 (else null: on the io threads);
  // set before the first session starts, owned by the server.
  asio::thread_pool* handlers = nullptr;

  std::vector<std::shared_ptr<Session>> LiveSessions() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::shared_ptr<Session>> live;
    for (const auto& [id, weak] : sessions) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
    return live;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared);
  ~Session();

  // Registers the session and serves it; one accepted while Shutdown began is closed.
  void Start();

  // From any thread: closes the session if it is idle; a busy one closes after its answer, as
  // it sees `draining`.
  void DrainIfIdle();

  // Only from the session's strand, or once no io thread runs.
  void CloseNow();

 private:
  void NextRequest();
  void ReadHeader();
  void OnHeader();
  void ReadBody();
  void ReadFailed(const beast::error_code& ec);
  void Refuse(int http_status, const Status& status);
  void Serve();
  void Answer(Response response, const Request& request, bool keep_alive, bool head,
              Clock::time_point start);
  Response HandleTracked(Request* request, Clock::time_point start);
  Response Handle(Request* request);
  void Write(BeastResponse response);
  void Linger();
  void DrainInput();

  beast::tcp_stream stream_;
  std::shared_ptr<Shared> shared_;
  std::string peer_;
  uint64_t id_ = 0;
  bool idle_ = false;  // waiting for a request's first byte
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<AppendingStringBody>> parser_;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<BeastResponse> response_;  // alive while it is written
  Clock::time_point read_deadline_;
};

}  // namespace reel::http::internal
