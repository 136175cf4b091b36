#include "http/message.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/json.h"
#include "base/strings.h"

namespace reel::http {
namespace {

constexpr std::string_view kUnauthenticatedPrefix = "unauthenticated: ";
constexpr std::string_view kUnauthenticatedName = "Unauthenticated";
constexpr StatusCode kAllCodes[] = {
    StatusCode::kCancelled,          StatusCode::kInvalidArgument,  StatusCode::kNotFound,
    StatusCode::kAlreadyExists,      StatusCode::kPermissionDenied, StatusCode::kResourceExhausted,
    StatusCode::kFailedPrecondition, StatusCode::kOutOfRange,       StatusCode::kUnimplemented,
    StatusCode::kInternal,           StatusCode::kUnavailable,      StatusCode::kDataLoss,
    StatusCode::kDeadlineExceeded,
};

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string FindHeader(const Headers& headers, std::string_view name) {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code an HTTP status suggests when the body names none (a proxy's page, a plain-text
// error); the inverse of HttpStatusFor where that is one-to-one.
StatusCode CodeForHttpStatus(int status) {
  switch (status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 405:
    case 501:
      return StatusCode::kUnimplemented;
    case 408:
    case 504:
      return StatusCode::kDeadlineExceeded;
    case 409:
      return StatusCode::kAlreadyExists;
    case 412:
      return StatusCode::kFailedPrecondition;
    case 413:
    case 429:
      return StatusCode::kResourceExhausted;
    case 502:
    case 503:
      return StatusCode::kUnavailable;
    default:
      return status >= 400 && status < 500 ? StatusCode::kInvalidArgument : StatusCode::kInternal;
  }
}

// The error body's fields: an Unauthenticated status travels without its marking prefix and
// under its own code name, so that clients in any language read it as HTTP means it.
nlohmann::json ErrorBody(const Status& status) {
  if (IsUnauthenticated(status)) {
    return {{"error", status.message().substr(kUnauthenticatedPrefix.size())},
            {"code", kUnauthenticatedName}};
  }
  return {{"error", status.message()}, {"code", StatusCodeName(status.code())}};
}

}  // namespace

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return Lower(x) < Lower(y); });
}

std::string Request::Header(std::string_view name) const { return FindHeader(headers, name); }
std::string Response::Header(std::string_view name) const { return FindHeader(headers, name); }

Response Response::Json(int status, const nlohmann::json& value) {
  Response r;
  r.status = status;
  r.headers["Content-Type"] = "application/json";
  // Replacing invalid UTF-8 instead of throwing: a handler's strings may come from user bytes.
  r.body = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Response Response::Text(int status, std::string text) {
  Response r;
  r.status = status;
  r.headers["Content-Type"] = "text/plain; charset=utf-8";
  r.body = std::move(text);
  return r;
}

Response Response::Error(const Status& status) { return Error(HttpStatusFor(status), status); }

Response Response::Error(int http_status, const Status& status) {
  REEL_DCHECK(!status.ok()) << "Response::Error with an OK status";
  const Status& error = status.ok() ? InternalError("an error answer without an error") : status;
  Response r = Json(http_status, ErrorBody(error));
  if (http_status == 401) r.headers["WWW-Authenticate"] = "Bearer";
  return r;
}

Result<nlohmann::json> JsonObjectBody(const Request& request) {
  Result<nlohmann::json> doc = ParseJson(request.body, "request body");
  if (!doc.ok()) return InvalidArgumentError(doc.status().message());
  if (!doc->is_object()) return InvalidArgumentError("request body: expected a JSON object");
  return doc;
}

Status UnauthenticatedError(std::string message) {
  return PermissionDeniedError(std::string(kUnauthenticatedPrefix) + std::move(message));
}

bool IsUnauthenticated(const Status& status) {
  return status.code() == StatusCode::kPermissionDenied &&
         status.message().compare(0, kUnauthenticatedPrefix.size(), kUnauthenticatedPrefix) == 0;
}

int HttpStatusFor(const Status& status) {
  if (IsUnauthenticated(status)) return 401;
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 412;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::optional<StatusCode> StatusCodeFromName(std::string_view name) {
  for (StatusCode code : kAllCodes) {
    if (StatusCodeName(code) == name) return code;
  }
  return std::nullopt;
}

Status StatusFromResponse(const Response& response, std::string_view what) {
  if (response.status >= 200 && response.status < 300) return Status::Ok();
  Result<nlohmann::json> doc = ParseJson(response.body, what);
  if (doc.ok() && doc->is_object()) {
    JsonFields fields(*doc, "");
    std::string code_name = fields.String("code");
    std::string message = fields.String("error");
    if (fields.ok()) {
      if (code_name == kUnauthenticatedName) return UnauthenticatedError(std::move(message));
      std::optional<StatusCode> code = StatusCodeFromName(code_name);
      if (code.has_value()) return Status(*code, std::move(message));
    }
  }
  std::string message = std::string(what) + ": HTTP " + std::to_string(response.status);
  if (!response.body.empty()) message += ": " + PrintableForMessage(response.body);
  if (response.status == 401) return UnauthenticatedError(std::move(message));
  return Status(CodeForHttpStatus(response.status), std::move(message));
}

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
               HexValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

void SplitTarget(std::string_view target, std::string* path,
                 std::map<std::string, std::string>* query) {
  size_t mark = target.find('?');
  *path = std::string(target.substr(0, mark));
  query->clear();
  if (mark == std::string_view::npos) return;
  std::string_view rest = target.substr(mark + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key = PercentDecode(pair.substr(0, eq), true);
    std::string value =
        eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1), true);
    (*query)[std::move(key)] = std::move(value);
  }
}

}  // namespace reel::http
