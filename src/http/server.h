// The HTTP/1.1 server every Reel service runs (registry, inference, scheduler, console):
// Boost.Beast on Boost.Asio behind this header, so including it costs no Boost compile time.
//
// Connections are served asynchronously by a few io threads (no thread per connection), with
// keep-alive and pipelined requests answered in order on one connection; `Connection: close`
// is honoured. Per request: the auth hook (if any), then the Router. Handlers run on the io
// threads, or on a pool of their own (handler_threads): a handler that blocks holds its thread
// (and its connection) until it returns.
//
// Handlers of different connections run concurrently (one io thread each): they must be
// thread-safe. Requests of one connection are handled one after another.
//
// Limits and their answers: a body over max_body_bytes is 413, headers over max_header_bytes
// 431, a malformed request 400; each then closes that connection (after letting the client
// finish sending, so it reads the answer) and the server keeps serving the others. A request
// not read within read_timeout, or a keep-alive connection idle for idle_timeout, is closed
// without an answer. A handler that throws (a bug) is answered 500 and logged; the server
// lives on. `Expect: 100-continue` is answered before the body is read.
//
// Thread-safety: all members may be called from any thread. Shutdown is idempotent and is
// called by the destructor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "http/message.h"
#include "http/router.h"

namespace reel::http {

struct ServerOptions {
  std::string host = "127.0.0.1";  // an address or a name; "0.0.0.0" or "::" for all
  int port = 0;                    // 0: a free port, which port() tells
  int threads = 2;  // io threads, which also run the handlers unless handler_threads > 0
  // > 0: handlers run on a pool of this many threads, and the io threads only read and write.
  // For handlers that block (the inference server's wait for a batch): a few io threads then
  // serve every connection's reads, instead of one blocked io thread per request in flight
  // waking up for each of its body's reads.
  int handler_threads = 0;
  uint64_t max_body_bytes = 64ull << 20;
  uint32_t max_header_bytes = 64 << 10;             // request line and headers together
  std::chrono::milliseconds idle_timeout{60'000};   // keep-alive: between two requests
  std::chrono::milliseconds read_timeout{30'000};   // a request's first byte to its last
  std::chrono::milliseconds write_timeout{60'000};  // an answer's first byte to its last
  // Runs before routing, on every request (unknown paths too, so they cannot be probed without
  // credentials); a non-OK Status is the answer, through Response::Error
  // (UnauthenticatedError: 401, PermissionDenied: 403). Public paths are the hook's decision.
  std::function<Status(const Request&)> auth;
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t requests = 0;  // requests handed to the auth hook and router
  uint64_t open_connections = 0;
  bool draining = false;  // Shutdown has begun
};

class Server {
 public:
  // Binds, listens and starts the io threads. Errors: InvalidArgument for bad options or a host
  // that does not resolve; the bind's error (e.g. the port is in use) naming the address.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options, Router router);

  ~Server();  // Shutdown(10 s)
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;             // the bound port, also when options.port was 0
  std::string address() const;  // "127.0.0.1:8080" ("[::1]:8080" for IPv6)
  std::string url() const;      // "http://" + address()
  ServerStats stats() const;

  // Graceful stop: stops accepting, closes idle keep-alive connections, lets requests in flight
  // finish and answers them with `Connection: close`, then joins the io threads. Connections
  // still busy at `deadline` are closed; a handler still running is not interrupted (it cannot
  // be), so one that never returns keeps Shutdown waiting for it (it logs which handlers it waits
  // for, every 10 s). Never call it from a handler.
  void Shutdown(std::chrono::milliseconds deadline = std::chrono::seconds(10));

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::http
