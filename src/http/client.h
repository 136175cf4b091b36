// An HTTP/1.1 client for Reel's services, for the CLI and tests: one keep-alive connection to
// one server, reused between calls. Boost.Beast behind this header.
//
//   REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make("http://127.0.0.1:8080/api"));
//   REEL_ASSIGN_OR_RETURN(nlohmann::json models, client.JsonCall("GET", "/models", nullptr));
//
// Errors: a server that cannot be reached is Unavailable naming the address; no complete answer
// within options.timeout is DeadlineExceeded. Send returns any HTTP status as a Response;
// JsonCall turns a non-2xx answer back into the Status the server's Response::Error carried
// (StatusFromResponse), message and code as the server wrote them.
//
// When the server has closed the kept-alive connection (idle timeout, restart), the call is
// sent once more on a new connection, but only when the old connection failed before any byte
// of an answer arrived: a server closes an idle connection only between requests, so the
// request was not handled.
//
// Thread-safety: a Client is one connection: use one per thread (they are cheap), or guard it.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "http/message.h"

namespace reel::http {

struct ClientOptions {
  std::chrono::milliseconds timeout{30'000};  // per call: connecting, sending, the whole answer
  std::string bearer_token;                   // sent as `Authorization: Bearer` when not empty
  Headers headers;                            // sent with every request
  uint64_t max_response_bytes = 1ull << 30;   // a larger answer is ResourceExhausted
};

class Client {
 public:
  // `base_url` is "http://host[:port][/prefix]" (IPv6 as "[::1]"); every target is appended to
  // the prefix. Errors: Unimplemented for https:// (not supported yet), InvalidArgument for
  // anything else that is not such a URL. Does not connect yet.
  static Result<Client> Make(std::string_view base_url, ClientOptions options = {});

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  // `target` starts with '/' and may carry a query ("/models?limit=5"); it is sent as given
  // (already percent-encoded). `content_type` is sent when not empty. Any HTTP status is OK.
  Result<Response> Send(std::string_view method, std::string_view target,
                        std::string_view body = {}, std::string_view content_type = {});
  // The same with `headers` added to (or replacing) the client's own for this call only.
  Result<Response> Send(std::string_view method, std::string_view target, std::string_view body,
                        std::string_view content_type, const Headers& headers);
  Result<Response> Get(std::string_view target) { return Send("GET", target); }
  Result<Response> Delete(std::string_view target) { return Send("DELETE", target); }
  Result<Response> Post(std::string_view target, std::string_view body,
                        std::string_view content_type = "application/json") {
    return Send("POST", target, body, content_type);
  }
  Result<Response> Put(std::string_view target, std::string_view body,
                       std::string_view content_type = "application/json") {
    return Send("PUT", target, body, content_type);
  }

  // Sends `body` (if not null) as JSON and returns the answer's JSON (null for an empty 2xx
  // body). A non-2xx answer is its Status; a 2xx body that is not JSON is DataLoss.
  Result<nlohmann::json> JsonCall(std::string_view method, std::string_view target,
                                  const nlohmann::json* body);

  const std::string& base_url() const;
  uint64_t connections_opened() const;  // tests check that calls share one connection
  void Close();                         // the next call connects again

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::http
