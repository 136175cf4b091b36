// Session: one connection of the HTTP server, from its first request to its close.
#include "http/session.h"

#include <boost/asio/post.hpp>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "base/logging.h"
#include "base/sync_point.h"
#include "http/beast_util.h"

namespace reel::http::internal {
namespace {

// After the last answer on a connection the client may still be sending (the body we refused,
// pipelined requests); reading and dropping that for a while lets the client read our answer
// (closing with unread input sends a reset, which can destroy the answer in the client's
// receive buffer).
constexpr std::chrono::seconds kLingerTime(2);
constexpr size_t kReadChunk = 16 << 10;

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

}  // namespace

std::string EndpointText(const tcp::endpoint& endpoint) {
  const std::string host = endpoint.address().to_string();
  const std::string port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + host + "]:" + port : host + ":" + port;
}

Session::Session(tcp::socket socket, std::shared_ptr<Shared> shared)
    : stream_(std::move(socket)), shared_(std::move(shared)) {
  beast::error_code ec;
  tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  peer_ = ec ? "unknown" : EndpointText(remote);
  stream_.socket().set_option(tcp::no_delay(true), ec);  // answers are one write each
}

Session::~Session() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->sessions.erase(id_);
  shared_->changed.notify_all();
}

void Session::Start() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->draining) return CloseNow();
    id_ = shared_->next_id++;
    shared_->sessions[id_] = weak_from_this();
  }
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->NextRequest(); });
}

void Session::DrainIfIdle() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->idle_) self->CloseNow();
  });
}

void Session::CloseNow() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  REEL_SYNC_POINT("Server::Session:Closed");
}

void Session::NextRequest() {
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

void Session::ReadHeader() {
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
void Session::OnHeader() {
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

void Session::ReadBody() {
  stream_.expires_at(read_deadline_);
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec) return self->ReadFailed(ec);
                      self->Serve();
                    });
}

// A request that could not be read: answered when the client is owed an answer, then closed.
void Session::ReadFailed(const beast::error_code& ec) {
  const uint64_t body_limit = shared_->options.max_body_bytes;
  if (ec == bhttp::error::body_limit) {
    return Refuse(413, ResourceExhaustedError("the request body is over the server's limit of " +
                                              std::to_string(body_limit) + " bytes"));
  }
  if (ec == bhttp::error::header_limit) {
    return Refuse(
        431, ResourceExhaustedError("the request headers are over the limit of " +
                                    std::to_string(shared_->options.max_header_bytes) + " bytes"));
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

void Session::Refuse(int http_status, const Status& status) {
  Logger("http")->info("{}: HTTP {}: {}", peer_, http_status, status.message());
  Write(ToBeast(Response::Error(http_status, status), /*keep_alive=*/false, /*head=*/false));
}

void Session::Serve() {
  BeastRequest message = parser_->release();
  parser_.reset();
  const bool keep_alive = message.keep_alive();
  const bool head = message.method() == bhttp::verb::head;
  Request request = ToRequest(std::move(message), peer_);
  request.client_gone = [fd = stream_.socket().native_handle()] { return PeerClosed(fd); };
  const auto start = Clock::now();
  if (shared_->handlers == nullptr) {
    Response response = HandleTracked(&request, start);
    return Answer(std::move(response), request, keep_alive, head, start);
  }
  // On the handler pool; the answer comes back to this session's strand to be written.
  asio::post(*shared_->handlers, [self = shared_from_this(), request = std::move(request),
                                  keep_alive, head, start]() mutable {
    Response response = self->HandleTracked(&request, start);
    asio::post(
        self->stream_.get_executor(),
        [self, response = std::move(response), request = std::move(request), keep_alive, head,
         start]() mutable { self->Answer(std::move(response), request, keep_alive, head, start); });
  });
}

void Session::Answer(Response response, const Request& request, bool keep_alive, bool head,
                     Clock::time_point start) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  Logger("http")->debug("{} {} {} -> {} ({:.1f} ms)", peer_, request.method, request.target,
                        response.status, ms);
  const bool close = beast::iequals(response.Header("Connection"), "close");
  Write(ToBeast(std::move(response), keep_alive && !close && !shared_->draining, head));
}

// Handle, listed in shared_->running while it runs (also if it throws, which Handle only does
// when even building the 500 fails).
Response Session::HandleTracked(Request* request, Clock::time_point start) {
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

Response Session::Handle(Request* request) {
  shared_->requests++;
  try {
    if (shared_->options.auth) {
      Status allowed = shared_->options.auth(*request);
      if (!allowed.ok()) return Response::Error(allowed);
    }
    return shared_->router.Dispatch(request);
  } catch (const std::exception& e) {
    Logger("http")->error("{} {}: the handler threw: {}", request->method, request->path, e.what());
  } catch (...) {
    Logger("http")->error("{} {}: the handler threw a non-exception", request->method,
                          request->path);
  }
  return Response::Error(InternalError("internal error answering " + request->method + " " +
                                       request->path + " (the server's log has the cause)"));
}

void Session::Write(BeastResponse response) {
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
void Session::Linger() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  buffer_.clear();
  stream_.expires_after(kLingerTime);
  DrainInput();
}

void Session::DrainInput() {
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->CloseNow();
                            self->buffer_.clear();
                            self->DrainInput();
                          });
}

}  // namespace reel::http::internal
