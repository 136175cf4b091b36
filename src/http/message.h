// What every Reel service and client exchanges over HTTP: a Request as a handler sees it, the
// Response it returns, and the one mapping between reel::Status and HTTP errors, used both ways
// (a server answers Response::Error(status); the Client turns that answer back into the same
// Status, so a CLI prints the server's own message).
//
// Error bodies are JSON: {"error": "<message>", "code": "<StatusCodeName>"}. HTTP statuses:
//   InvalidArgument 400, OutOfRange 400, Unauthenticated (below) 401, PermissionDenied 403,
//   NotFound 404, AlreadyExists 409, FailedPrecondition 412, ResourceExhausted 429,
//   Unimplemented 501, Unavailable 503, DeadlineExceeded 504, everything else 500.
// FailedPrecondition is 412, not 409, so that the status alone still tells it from
// AlreadyExists when a proxy replaces the body.
//
// reel::StatusCode has no Unauthenticated, and HTTP needs one to tell "who are you?" (401) from
// "you may not" (403). UnauthenticatedError() is a PermissionDenied Status marked by the prefix
// "unauthenticated: " in its message: the rest of Reel sees a permission error (exit code 4),
// Response::Error answers it 401 with `WWW-Authenticate: Bearer` and code "Unauthenticated".
//
// Thread-safety: values; the free functions are pure.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace reel::http {

// Header names compare case-insensitively (RFC 9110). A repeated header arrives as one entry,
// its values joined by ", ".
struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};
using Headers = std::map<std::string, std::string, CaseInsensitiveLess>;

inline constexpr size_t kBodyReadAhead = 64;

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v2/models/m%20x/infer?timeout=5"
  std::string path;    // the target before '?', still percent-encoded: "/v2/models/m%20x/infer"
  std::map<std::string, std::string> query;  // decoded; a repeated key keeps its last value
  Headers headers;
  // A body of known length is read into a string with kBodyReadAhead bytes of capacity past
  // its end (the server's requests, the client's responses), so that a parser that reads ahead
  // of what it parses (simdjson's 64 bytes of padding) can parse it where it lies, not a copy.
  std::string body;
  std::map<std::string, std::string> params;  // route pattern captures, percent-decoded
  std::string peer;                           // "127.0.0.1:53412"
  // True once the client has closed or reset its connection (the server fills it in; empty in
  // requests built elsewhere). Cheap: one non-blocking peek at the socket.
  std::function<bool()> client_gone;

  // The header's value, or "" when absent.
  std::string Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;

  std::string Header(std::string_view name) const;

  // Body `value.dump()`, Content-Type application/json.
  static Response Json(int status, const nlohmann::json& value);
  // Content-Type text/plain; charset=utf-8.
  static Response Text(int status, std::string text);
  // The JSON error body at the HTTP status the table above gives `status` (which must not be OK).
  static Response Error(const Status& status);
  // The same body at a chosen HTTP status (405 with Allow, 413, 431 ...).
  static Response Error(int http_status, const Status& status);
};

// PermissionDenied "unauthenticated: <message>" (see above).
Status UnauthenticatedError(std::string message);

// The request's body as a JSON object. Errors: InvalidArgument naming what is wrong with it.
Result<nlohmann::json> JsonObjectBody(const Request& request);
bool IsUnauthenticated(const Status& status);

// The HTTP status Response::Error uses for `status`.
int HttpStatusFor(const Status& status);

// The inverse of Response::Error for a non-2xx response: the Status its JSON error body names,
// or, when the body is not one, the code the HTTP status suggests with a message quoting
// `what` ("GET http://host:1/x"), the status and the start of the body.
Status StatusFromResponse(const Response& response, std::string_view what);

// The code StatusCodeName() gives this name, if any ("NotFound" -> kNotFound).
std::optional<StatusCode> StatusCodeFromName(std::string_view name);

// "%2F" -> "/"; with `plus_is_space` (query strings) '+' is a space. A malformed escape is kept
// as it is.
std::string PercentDecode(std::string_view text, bool plus_is_space);

// Splits a request target into its path and decoded query parameters.
void SplitTarget(std::string_view target, std::string* path,
                 std::map<std::string, std::string>* query);

}  // namespace reel::http
