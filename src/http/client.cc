// The Beast adapter of client.h: Boost's exceptions and error codes stop here.
//
// Calls are synchronous for the caller but run as Beast's asynchronous operations on a private
// io_context, because only those honour a deadline (beast::tcp_stream's timers); the context
// runs on the calling thread until the one operation in flight completes.
#include "http/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cctype>
#include <optional>
#include <utility>

#include "base/json.h"
#include "base/logging.h"
#include "base/strings.h"
#include "http/beast_util.h"

namespace reel::http {
namespace {

using namespace internal;  // the Beast names and helpers (beast_util.h)

// What a connection the server closed while idle looks like on our next use of it.
bool IsClosedByPeer(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted;
}

bool HasControlChars(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

Response FromBeast(bhttp::response<AppendingStringBody>&& message) {
  Response response;
  response.status = static_cast<int>(message.result_int());
  response.headers = HeadersOf(message);
  response.body = std::move(message.body());
  return response;
}

struct ParsedUrl {
  std::string host;       // without brackets
  std::string port;       // digits
  std::string authority;  // "host:port" as the Host header wants it
  std::string prefix;     // "" or "/api", no trailing '/'
};

Result<ParsedUrl> ParseUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("bad server URL '" + PrintableForMessage(url) + "': " + why);
  };
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  if (url.substr(0, kHttps.size()) == kHttps) {
    return UnimplementedError("https is not supported yet (" + PrintableForMessage(url) +
                              "): use http:// behind a TLS proxy");
  }
  if (url.substr(0, kHttp.size()) != kHttp) return bad("expected http://host[:port][/prefix]");
  std::string_view rest = url.substr(kHttp.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find_first_of("@?#") != std::string_view::npos)
    return bad("no user, query or fragment");
  if (path.find_first_of("?#") != std::string_view::npos || HasControlChars(url)) {
    return bad("no query or fragment");
  }
  ParsedUrl parsed;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an unclosed '['");
    parsed.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad("junk after ']'");
    if (!after.empty()) port = after.substr(1);
  } else {
    const size_t colon = authority.find(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (parsed.host.empty()) return bad("no host");
  if (port.empty()) port = "80";
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
    return bad("the port must be 1-65535");
  }
  parsed.port = std::string(port);
  parsed.authority = std::string(authority);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  parsed.prefix = std::string(path);
  return parsed;
}

// One try of a call; `retry` when it failed in a way that proves the server did not see it.
struct Attempt {
  Status status;
  Response response;
  bool retry = false;
};

}  // namespace

struct Client::Impl {
  Impl(ClientOptions o, ParsedUrl u) : options(std::move(o)), url(std::move(u)) {
    base_url = "http://" + url.authority + url.prefix;
    address = url.authority;
  }

  // Runs the context until the operation `start` begins completes; its error.
  template <typename Start>
  beast::error_code Run(Start&& start) {
    beast::error_code result = asio::error::would_block;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    return result;
  }

  Result<BeastRequest> Build(std::string_view method, std::string_view target,
                             std::string_view body, std::string_view content_type,
                             const Headers& extra) const;
  Status Connect(Clock::time_point deadline, const std::string& what);
  Attempt Exchange(const BeastRequest& request, Clock::time_point deadline,
                   const std::string& what);
  void Drop() {
    stream.reset();
    buffer.clear();
  }
  std::string Within() const {
    return "no answer within " + std::to_string(options.timeout.count()) + " ms";
  }

  asio::io_context io{1};  // first, so that it is destroyed last
  ClientOptions options;
  ParsedUrl url;
  std::string base_url;
  std::string address;
  std::optional<beast::tcp_stream> stream;  // the kept-alive connection
  beast::flat_buffer buffer;
  uint64_t connections = 0;
};

Result<BeastRequest> Client::Impl::Build(std::string_view method, std::string_view target,
                                         std::string_view body, std::string_view content_type,
                                         const Headers& extra) const {
  if (!IsToken(method)) {
    return InvalidArgumentError("bad HTTP method '" + PrintableForMessage(method) + "'");
  }
  if (target.empty() || target.front() != '/' || HasControlChars(target) ||
      target.find(' ') != std::string_view::npos) {
    return InvalidArgumentError("bad request target '" + PrintableForMessage(target) +
                                "': it starts with '/' and has no spaces");
  }
  BeastRequest request;
  const bhttp::verb verb = bhttp::string_to_verb(beast::string_view(method.data(), method.size()));
  if (verb == bhttp::verb::unknown) {
    request.method_string(beast::string_view(method.data(), method.size()));
  } else {
    request.method(verb);
  }
  request.target(url.prefix + std::string(target));
  request.version(11);
  request.set(bhttp::field::host, url.authority);
  request.set(bhttp::field::user_agent, "reel");
  if (HasControlChars(options.bearer_token)) return InvalidArgumentError("bad bearer token");
  if (!options.bearer_token.empty()) {
    request.set(bhttp::field::authorization, "Bearer " + options.bearer_token);
  }
  for (const Headers* headers : {&options.headers, &extra}) {
    for (const auto& [name, value] : *headers) {
      if (!IsToken(name) || HasControlChars(value)) {
        return InvalidArgumentError("bad header '" + PrintableForMessage(name) + "'");
      }
      request.set(name, value);
    }
  }
  if (!content_type.empty()) {
    if (HasControlChars(content_type)) return InvalidArgumentError("bad content type");
    request.set(bhttp::field::content_type,
                beast::string_view(content_type.data(), content_type.size()));
  }
  request.body() = std::string(body);  // HTTP/1.1 keeps the connection unless a header closes it
  request.prepare_payload();
  return request;
}

Status Client::Impl::Connect(Clock::time_point deadline, const std::string& what) {
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(url.host, url.port, tcp::resolver::numeric_service, ec);
  if (ec) return UnavailableError(what + ": cannot resolve " + url.host + ": " + ec.message());
  stream.emplace(io);
  buffer.clear();
  stream->expires_at(deadline);
  ec = Run([&](auto handler) { stream->async_connect(endpoints, std::move(handler)); });
  if (ec) {
    Drop();
    if (ec == beast::error::timeout)
      return DeadlineExceededError(what + ": connecting to " + address + ": " + Within());
    return UnavailableError(what + ": cannot connect to " + address + ": " + ec.message());
  }
  stream->socket().set_option(tcp::no_delay(true), ec);  // a request is one write
  ++connections;
  return Status::Ok();
}

Attempt Client::Impl::Exchange(const BeastRequest& request, Clock::time_point deadline,
                               const std::string& what) {
  stream->expires_at(deadline);
  beast::error_code ec =
      Run([&](auto handler) { bhttp::async_write(*stream, request, std::move(handler)); });
  if (ec) {
    Drop();
    if (ec == beast::error::timeout)
      return {DeadlineExceededError(what + ": " + Within()), {}, false};
    return {UnavailableError(what + ": sending to " + address + ": " + ec.message()),
            {},
            IsClosedByPeer(ec)};
  }
  bhttp::response_parser<AppendingStringBody> parser;
  parser.body_limit(options.max_response_bytes);
  parser.header_limit(1 << 20);
  parser.skip(request.method() == bhttp::verb::head);  // HEAD answers have no body
  stream->expires_at(deadline);
  ec = Run([&](auto handler) { bhttp::async_read(*stream, buffer, parser, std::move(handler)); });
  if (ec) {
    const bool nothing = !parser.got_some() && buffer.size() == 0;
    Drop();
    if (ec == beast::error::timeout)
      return {DeadlineExceededError(what + ": " + Within()), {}, false};
    if (ec == bhttp::error::body_limit) {
      return {ResourceExhaustedError(what + ": the answer is over " +
                                     std::to_string(options.max_response_bytes) + " bytes"),
              {},
              false};
    }
    if (nothing && IsClosedByPeer(ec)) {
      return {UnavailableError(what + ": " + address + " closed the connection without answering"),
              {},
              true};
    }
    if (IsParseError(ec) && !IsClosedByPeer(ec) && ec != bhttp::error::partial_message) {
      return {DataLossError(what + ": a malformed HTTP answer: " + ec.message()), {}, false};
    }
    return {UnavailableError(what + ": reading the answer: " + ec.message()), {}, false};
  }
  const bool keep_alive = parser.get().keep_alive();
  Attempt done{Status::Ok(), FromBeast(parser.release()), false};
  if (!keep_alive) Drop();
  return done;
}

Result<Client> Client::Make(std::string_view base_url, ClientOptions options) {
  if (options.timeout.count() <= 0)
    return InvalidArgumentError("http client: the timeout must be positive");
  REEL_ASSIGN_OR_RETURN(ParsedUrl url, ParseUrl(base_url));
  return Client(std::make_unique<Impl>(std::move(options), std::move(url)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

const std::string& Client::base_url() const { return impl_->base_url; }
uint64_t Client::connections_opened() const { return impl_->connections; }
void Client::Close() { impl_->Drop(); }

Result<Response> Client::Send(std::string_view method, std::string_view target,
                              std::string_view body, std::string_view content_type) {
  return Send(method, target, body, content_type, Headers{});
}

Result<Response> Client::Send(std::string_view method, std::string_view target,
                              std::string_view body, std::string_view content_type,
                              const Headers& headers) {
  Impl& c = *impl_;
  const std::string what = std::string(method) + " " + c.base_url + PrintableForMessage(target);
  REEL_ASSIGN_OR_RETURN(BeastRequest request, c.Build(method, target, body, content_type, headers));
  const auto deadline = Clock::now() + c.options.timeout;
  try {
    for (int attempt = 0;; ++attempt) {
      const bool reused = c.stream.has_value();
      if (!reused) REEL_RETURN_IF_ERROR(c.Connect(deadline, what));
      Attempt result = c.Exchange(request, deadline, what);
      if (result.status.ok()) return std::move(result.response);
      if (!reused || !result.retry || attempt > 0) return result.status;
      Logger("http")->debug("{}: the kept-alive connection was closed; reconnecting", what);
    }
  } catch (const std::exception& e) {  // bad_alloc, or a Boost error thrown despite error codes
    c.Drop();
    return InternalError(what + ": " + e.what());
  }
}

Result<nlohmann::json> Client::JsonCall(std::string_view method, std::string_view target,
                                        const nlohmann::json* body) {
  std::string text;
  if (body != nullptr) text = body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  REEL_ASSIGN_OR_RETURN(Response response,
                        Send(method, target, text, body != nullptr ? "application/json" : ""));
  const std::string what =
      std::string(method) + " " + impl_->base_url + PrintableForMessage(target);
  if (response.status < 200 || response.status >= 300) return StatusFromResponse(response, what);
  if (response.body.empty()) return nlohmann::json();
  return ParseJson(response.body, what);
}

}  // namespace reel::http
