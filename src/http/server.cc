// The Beast adapter of server.h: Boost's exceptions and error codes stop here.
//
// One Session per connection, all of its work on its own strand (so a connection needs no
// lock even with several io threads). A session loops: wait for a request's first byte (idle
// timeout), read its header and body (read timeout), run auth and router, write the answer
// (write timeout). Shutdown asks every session to drain: an idle one closes at once, a busy
// one closes after the answer in flight.
#include "http/server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "base/sync_point.h"
#include "http/beast_util.h"

namespace reel::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using BeastRequest = bhttp::request<bhttp::string_body>;
using BeastResponse = bhttp::response<bhttp::string_body>;
using internal::HeadersOf;
using internal::IsParseError;
using internal::Str;

// After the last answer on a connection the client may still be sending (the body we refused,
// pipelined requests); reading and dropping that for a while lets the client read our answer
// (closing with unread input sends a reset, which can destroy the answer in the client's
// receive buffer).
constexpr std::chrono::seconds kLingerTime(2);
constexpr size_t kReadChunk = 16 << 10;
// How often a Shutdown past its deadline says again which handlers it still waits for.
constexpr std::chrono::seconds kStuckReport(10);

std::string EndpointText(const tcp::endpoint& endpoint) {
  const std::string host = endpoint.address().to_string();
  const std::string port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + host + "]:" + port : host + ":" + port;
}

// Whether the peer of `fd` has closed (end of stream) or reset the connection. Bytes waiting
// (a pipelined request) mean it is still there; nothing is consumed.
bool PeerClosed(int fd) {
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

Request ToRequest(BeastRequest&& message, const std::string& peer) {
  Request request;
  request.method = Str(message.method_string());
  request.target = Str(message.target());
  SplitTarget(request.target, &request.path, &request.query);
  request.headers = HeadersOf(message);
  request.body = std::move(message.body());
  request.peer = peer;
  return request;
}

// Headers Beast computes itself, and values that would split the answer, are not copied.
bool CopyableHeader(const std::string& name, const std::string& value) {
  if (value.find_first_of("\r\n") != std::string::npos ||
      name.find_first_of("\r\n: ") != std::string::npos) {
    return false;
  }
  return !beast::iequals(name, "Content-Length") && !beast::iequals(name, "Connection") &&
         !beast::iequals(name, "Transfer-Encoding");
}

BeastResponse ToBeast(Response response, bool keep_alive, bool head) {
  if (response.status < 100 || response.status > 599) {
    Logger("http")->error("a handler answered HTTP status {}; sending 500", response.status);
    response = Response::Error(InternalError("the handler answered an invalid HTTP status"));
  }
  BeastResponse message;
  message.version(11);
  message.result(static_cast<unsigned>(response.status));
  for (const auto& [name, value] : response.headers) {
    if (CopyableHeader(name, value)) message.set(name, value);
  }
  message.set(bhttp::field::server, "reel");
  message.keep_alive(keep_alive);
  if (head) {
    message.content_length(response.body.size());  // the size a GET would get, no body
  } else {
    message.body() = std::move(response.body);
    message.prepare_payload();
  }
  return message;
}

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
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {
    beast::error_code ec;
    tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
    peer_ = ec ? "unknown" : EndpointText(remote);
    stream_.socket().set_option(tcp::no_delay(true), ec);  // answers are one write each
  }

  ~Session() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->sessions.erase(id_);
    shared_->changed.notify_all();
  }

  // Registers the session and serves it; one accepted while Shutdown began is closed.
  void Start() {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->draining) return CloseNow();
      id_ = shared_->next_id++;
      shared_->sessions[id_] = weak_from_this();
    }
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->NextRequest(); });
  }

  // From any thread: closes the session if it is idle; a busy one closes after its answer, as
  // it sees `draining`.
  void DrainIfIdle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->CloseNow();
    });
  }

  // Only from the session's strand, or once no io thread runs.
  void CloseNow() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    REEL_SYNC_POINT("Server::Session:Closed");
  }

 private:
  void NextRequest() {
    if (buffer_.size() > 0) return ReadHeader();  // a pipelined request is already here
    if (shared_->draining) return CloseNow();
    idle_ = true;
    stream_.expires_after(shared_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->idle_ = false;
                              if (ec) return self->CloseNow();  // closed, idle, or drained
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(shared_->options.max_header_bytes);
    parser_->body_limit(shared_->options.max_body_bytes);
    read_deadline_ = Clock::now() + shared_->options.read_timeout;
    stream_.expires_at(read_deadline_);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) return self->ReadFailed(ec);
                               self->OnHeader();
                             });
  }

  // curl and others wait for "100 Continue" before sending a large body.
  void OnHeader() {
    if (parser_->is_done()) return Serve();
    if (!beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) return ReadBody();
    continue_.emplace(bhttp::status::continue_, 11);
    stream_.expires_after(shared_->options.write_timeout);
    bhttp::async_write(stream_, *continue_,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->CloseNow();
                         self->ReadBody();
                       });
  }

  void ReadBody() {
    stream_.expires_at(read_deadline_);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->ReadFailed(ec);
                        self->Serve();
                      });
  }

  // A request that could not be read: answered when the client is owed an answer, then closed.
  void ReadFailed(const beast::error_code& ec) {
    const uint64_t body_limit = shared_->options.max_body_bytes;
    if (ec == bhttp::error::body_limit) {
      return Refuse(413, ResourceExhaustedError("the request body is over the server's limit of " +
                                                std::to_string(body_limit) + " bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, ResourceExhaustedError("the request headers are over the limit of " +
                                                std::to_string(shared_->options.max_header_bytes) +
                                                " bytes"));
    }
    // A timeout has closed the socket already (beast::tcp_stream does), so no 408 can be sent.
    if (ec == beast::error::timeout) {
      Logger("http")->debug("{}: the request was not read within the read timeout", peer_);
      return CloseNow();
    }
    if (IsParseError(ec) && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return Refuse(400, InvalidArgumentError("malformed HTTP request: " + ec.message()));
    }
    CloseNow();  // the peer went away
  }

  void Refuse(int http_status, const Status& status) {
    Logger("http")->info("{}: HTTP {}: {}", peer_, http_status, status.message());
    Write(ToBeast(Response::Error(http_status, status), /*keep_alive=*/false, /*head=*/false));
  }

  void Serve() {
    BeastRequest message = parser_->release();
    parser_.reset();
    const bool keep_alive = message.keep_alive();
    const bool head = message.method() == bhttp::verb::head;
    Request request = ToRequest(std::move(message), peer_);
    request.client_gone = [fd = stream_.socket().native_handle()] { return PeerClosed(fd); };
    const auto start = Clock::now();
    Response response = HandleTracked(&request, start);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    Logger("http")->debug("{} {} {} -> {} ({:.1f} ms)", peer_, request.method, request.target,
                          response.status, ms);
    const bool close = beast::iequals(response.Header("Connection"), "close");
    Write(ToBeast(std::move(response), keep_alive && !close && !shared_->draining, head));
  }

  // Handle, listed in shared_->running while it runs (also if it throws, which Handle only does
  // when even building the 500 fails).
  Response HandleTracked(Request* request, Clock::time_point start) {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->running[id_] = {request->method + " " + request->target + " from " + peer_, start};
    }
    struct Untrack {
      Shared* shared;
      uint64_t id;
      ~Untrack() {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->running.erase(id);
        shared->changed.notify_all();
      }
    } untrack{shared_.get(), id_};
    return Handle(request);
  }

  Response Handle(Request* request) {
    shared_->requests++;
    try {
      if (shared_->options.auth) {
        Status allowed = shared_->options.auth(*request);
        if (!allowed.ok()) return Response::Error(allowed);
      }
      return shared_->router.Dispatch(request);
    } catch (const std::exception& e) {
      Logger("http")->error("{} {}: the handler threw: {}", request->method, request->path,
                            e.what());
    } catch (...) {
      Logger("http")->error("{} {}: the handler threw a non-exception", request->method,
                            request->path);
    }
    return Response::Error(InternalError("internal error answering " + request->method + " " +
                                         request->path + " (the server's log has the cause)"));
  }

  void Write(BeastResponse response) {
    response_ = std::move(response);
    stream_.expires_after(shared_->options.write_timeout);
    bhttp::async_write(stream_, *response_,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         const bool keep_alive = self->response_->keep_alive();
                         self->response_.reset();
                         if (ec) return self->CloseNow();
                         if (!keep_alive) return self->Linger();
                         self->NextRequest();
                       });
  }

  // The last answer is out: sends FIN, then reads and drops what the client still sends (the
  // rest of a refused body, requests pipelined after a close) until it closes or kLingerTime.
  void Linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    stream_.expires_after(kLingerTime);
    DrainInput();
  }

  void DrainInput() {
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->CloseNow();
                              self->buffer_.clear();
                              self->DrainInput();
                            });
  }

  beast::tcp_stream stream_;
  std::shared_ptr<Shared> shared_;
  std::string peer_;
  uint64_t id_ = 0;
  bool idle_ = false;  // waiting for a request's first byte
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<BeastResponse> response_;  // alive while it is written
  Clock::time_point read_deadline_;
};

// Past Shutdown's deadline only handlers still running keep the io threads from returning. They
// cannot be interrupted, and returning while one runs would free the router and the io context
// under it (and let the caller free what it uses), so Shutdown waits for them, but logs which
// ones, again every kStuckReport, instead of hanging silently.
void AwaitHandlers(Shared& shared, const std::string& address) {
  std::unique_lock<std::mutex> lock(shared.mu);
  auto none = [&] { return shared.running.empty(); };
  if (none()) return;
  do {
    const auto now = Clock::now();
    for (const auto& [id, running] : shared.running) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - running.since).count();
      Logger("http")->warn(
          "http server {}: Shutdown waits for a handler, which cannot be interrupted: {} "
          "(running for {} ms)",
          address, running.what, ms);
    }
    lock.unlock();
    REEL_SYNC_POINT("Server::Shutdown:AwaitingHandlers");
    lock.lock();
  } while (!shared.changed.wait_for(lock, kStuckReport, none));
}

}  // namespace

struct Server::Impl {
  explicit Impl(std::shared_ptr<Shared> s)
      : io(s->options.threads),
        work(asio::make_work_guard(io)),
        acceptor(asio::make_strand(io)),
        retry(acceptor.get_executor()),
        shared(std::move(s)) {}

  Status Listen();
  void Accept();
  void OnAccept(const beast::error_code& ec, tcp::socket socket);

  asio::io_context io;  // first, so that it is destroyed last
  // Keeps the io threads in run() until Shutdown stops them. Without it run() returns as soon as
  // nothing is pending, which happens in Shutdown once the acceptor is closed and the last
  // connection's peer has closed it: what Shutdown posts next (a drain) would then never run,
  // and the connection it holds would count as busy until the deadline.
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after a failed accept (out of descriptors)
  std::shared_ptr<Shared> shared;
  std::vector<std::thread> threads;
  std::string address;
  int port = 0;
  std::mutex shutdown_mu;
  bool shut_down = false;  // guarded by shutdown_mu
};

Status Server::Impl::Listen() {
  const ServerOptions& o = shared->options;
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return InvalidArgumentError("http server: cannot resolve host '" + o.host +
                                "': " + ec.message());
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  const std::string where = "http server: listening on " + EndpointText(endpoint);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    // A port in use is a service that cannot come up now, as a refused connection is.
    if (ec == asio::error::address_in_use) return UnavailableError(where + ": " + ec.message());
    return ErrnoToStatus(ec.value(), where);
  }
  const tcp::endpoint local = acceptor.local_endpoint(ec);
  if (ec) return ErrnoToStatus(ec.value(), where);
  port = local.port();
  address = EndpointText(local);
  return Status::Ok();
}

void Server::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void Server::Impl::OnAccept(const beast::error_code& ec, tcp::socket socket) {
  if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of file descriptors, typically: wait a little instead of spinning on the error.
    Logger("http")->warn("{}: accept failed: {}", address, ec.message());
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor.is_open()) Accept();
    });
    return;
  }
  shared->accepted++;
  std::make_shared<Session>(std::move(socket), shared)->Start();
  Accept();
}

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options, Router router) {
  if (options.threads < 1) return InvalidArgumentError("http server: threads must be at least 1");
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgumentError("http server: port " + std::to_string(options.port));
  }
  if (options.idle_timeout.count() <= 0 || options.read_timeout.count() <= 0 ||
      options.write_timeout.count() <= 0 || options.max_header_bytes == 0) {
    return InvalidArgumentError("http server: timeouts and the header limit must be positive");
  }
  auto impl =
      std::make_unique<Impl>(std::make_shared<Shared>(std::move(options), std::move(router)));
  try {
    REEL_RETURN_IF_ERROR(impl->Listen());
    impl->Accept();
    for (int i = 0; i < impl->shared->options.threads; ++i) {
      impl->threads.emplace_back([io = &impl->io] {
        for (;;) {
          try {
            io->run();
            return;
          } catch (const std::exception& e) {  // a bug in a completion handler: keep serving
            Logger("http")->error("http server: io thread: {}", e.what());
          }
        }
      });
    }
  } catch (const std::exception& e) {  // std::system_error from thread creation, bad_alloc
    Server failed(std::move(impl));    // stops what did start
    return InternalError(std::string("http server: ") + e.what());
  }
  Logger("http")->info("http server listening on {}", impl->address);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) Shutdown();
}

int Server::port() const { return impl_->port; }
std::string Server::address() const { return impl_->address; }
std::string Server::url() const { return "http://" + impl_->address; }

ServerStats Server::stats() const {
  ServerStats stats;
  stats.connections_accepted = impl_->shared->accepted;
  stats.requests = impl_->shared->requests;
  stats.draining = impl_->shared->draining;
  std::lock_guard<std::mutex> lock(impl_->shared->mu);
  stats.open_connections = impl_->shared->sessions.size();
  return stats;
}

void Server::Shutdown(std::chrono::milliseconds deadline) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> once(s.shutdown_mu);
  for (const std::thread& thread : s.threads) {
    REEL_CHECK(thread.get_id() != std::this_thread::get_id())
        << "Server::Shutdown from a handler would wait for itself";
  }
  if (s.shut_down) return;
  s.shut_down = true;
  const auto until = Clock::now() + deadline;
  Shared& shared = *s.shared;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.draining = true;  // under mu: a session starting now sees it, or is in the list
  }
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.retry.cancel();
    REEL_SYNC_POINT("Server::Shutdown:AcceptorClosed");
  });
  {
    // Scoped: holding the sessions past their drain would keep them from ending.
    const std::vector<std::shared_ptr<Session>> live = shared.LiveSessions();
    REEL_SYNC_POINT("Server::Shutdown:DrainingIdle");
    for (const auto& session : live) session->DrainIfIdle();
  }
  bool late = false;
  {
    std::unique_lock<std::mutex> lock(shared.mu);
    if (!shared.changed.wait_until(lock, until, [&] { return shared.sessions.empty(); })) {
      late = true;
      Logger("http")->warn("http server {}: {} connections still busy after {} ms; closing them",
                           s.address, shared.sessions.size(), deadline.count());
    }
  }
  if (late) REEL_SYNC_POINT("Server::Shutdown:PastDeadline");
  s.io.stop();  // each io thread returns as soon as the handler it runs (if any) does
  if (late) AwaitHandlers(shared, s.address);
  for (std::thread& thread : s.threads) thread.join();
  s.threads.clear();
  // No io thread runs now: what is left is closed from here.
  beast::error_code ignored;
  s.acceptor.close(ignored);
  for (const auto& session : shared.LiveSessions()) session->CloseNow();
  {
    // Closed now, though their objects live until the io context drops the handlers they still
    // had pending: stats() must not count them as open.
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.sessions.clear();
  }
  Logger("http")->info("http server {} stopped", s.address);
}

}  // namespace reel::http
