#include "base/uri.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <vector>

namespace reel {
namespace {

constexpr char kHexDigits[] = "0123456789ABCDEF";

bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsUnreserved(char c) {
  return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '-' || c == '_' || c == '.' || c == '~';
}
bool IsSchemeChar(char c) {
  return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '+' || c == '-' || c == '.';
}
bool IsKnownScheme(std::string_view scheme) {
  return scheme == "s3" || scheme == "file" || scheme == "mem";
}

int HexValue(char c) {
  if (IsAsciiDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The RFC 3986 scheme of `text` ("s3" in "s3://b"), or nothing when `text` does not start with
// one (a bare path such as "data/x" or "/abs").
std::optional<std::string_view> SchemeOf(std::string_view text) {
  if (text.empty() || !IsAsciiAlpha(text[0])) return std::nullopt;
  size_t i = 1;
  while (i < text.size() && IsSchemeChar(text[i])) ++i;
  if (i >= text.size() || text[i] != ':') return std::nullopt;
  return text.substr(0, i);
}

// Lexical: "." and empty segments vanish, ".." drops the segment before it (and stops at "/").
// Symlinks are not consulted, so "/a/link/../b" is "/a/b" whatever the link points at; the
// result names what the user wrote, not what the filesystem resolves it to today.
std::string NormaliseAbsolutePath(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(start, end - start);
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!segment.empty() && segment != ".") {
      segments.push_back(segment);
    }
    start = end + 1;
  }
  if (segments.empty()) return "/";
  std::string out;
  for (std::string_view segment : segments) {
    out += '/';
    out += segment;
  }
  return out;
}

Result<std::string> CurrentDirectory() {
  char* cwd = ::getcwd(nullptr, 0);  // glibc allocates a buffer of the right size
  if (cwd == nullptr) return ErrnoToStatus(errno, "getcwd");
  std::string out(cwd);
  std::free(cwd);
  return out;
}

Result<std::string> AbsoluteNormalisedPath(std::string_view path) {
  if (!path.empty() && path[0] == '/') return NormaliseAbsolutePath(path);
  REEL_ASSIGN_OR_RETURN(std::string cwd, CurrentDirectory());
  return NormaliseAbsolutePath(cwd + "/" + std::string(path));
}

// AWS's rules as far as Reel relies on them: 3-63 characters of [a-z0-9.-], starting and ending
// with a letter or digit. Checked here so that a typo fails before any request is signed.
bool IsValidBucketName(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || IsAsciiDigit(c) || c == '.' || c == '-')) return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || IsAsciiDigit(c); };
  return alnum(bucket.front()) && alnum(bucket.back());
}

Result<std::map<std::string, std::string>> ParseQuery(std::string_view text) {
  std::map<std::string, std::string> query;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('&', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;  // "a=1&&b" and a trailing '&' carry nothing
    const size_t eq = item.find('=');
    REEL_ASSIGN_OR_RETURN(std::string key, PercentDecode(item.substr(0, eq)));
    std::string value;
    if (eq != std::string_view::npos) {
      REEL_ASSIGN_OR_RETURN(value, PercentDecode(item.substr(eq + 1)));
    }
    query[std::move(key)] = std::move(value);  // a repeated key: the last one wins
  }
  return query;
}

std::string StripLeadingSlashes(const std::string& path) {
  const size_t first = path.find_first_not_of('/');
  return first == std::string::npos ? std::string() : path.substr(first);
}

Status UriError(std::string_view text, std::string_view problem) {
  return InvalidArgumentError("invalid URI '" + std::string(text) + "': " + std::string(problem));
}

// `rest` is what follows "scheme://": authority, then the path, then an optional "?query".
Result<Uri> ParseHierarchical(std::string_view text, std::string scheme, std::string_view rest) {
  Uri uri;
  uri.scheme = std::move(scheme);
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    auto query = ParseQuery(rest.substr(q + 1));
    if (!query.ok()) return query.status().WithContext("URI '" + std::string(text) + "'");
    uri.query = std::move(query).value();
    rest = rest.substr(0, q);
  }
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const std::string_view raw_path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  auto decoded = PercentDecode(raw_path);
  if (!decoded.ok()) return decoded.status().WithContext("URI '" + std::string(text) + "'");

  if (uri.scheme == "file") {
    // "file://localhost/x" is the RFC 8089 spelling of "file:///x"; any other host is likely
    // a relative path written with one slash too few ("file://data/x").
    if (!authority.empty() && authority != "localhost") {
      return UriError(text, "file URIs take no host ('" + std::string(authority) +
                                "'); write file:///absolute/path");
    }
    if (decoded->empty()) return UriError(text, "file URI without a path");
    uri.path = NormaliseAbsolutePath(*decoded);
    return uri;
  }
  if (uri.scheme == "s3") {
    if (authority.empty()) return UriError(text, "s3 URI without a bucket");
    if (!IsValidBucketName(authority)) {
      return UriError(text, "invalid bucket name '" + std::string(authority) +
                                "' (3-63 characters: lower-case letters, digits, '.' and '-', "
                                "starting and ending with a letter or digit)");
    }
  }
  uri.authority = std::string(authority);
  uri.path = StripLeadingSlashes(decoded.value());
  return uri;
}

}  // namespace

std::string Uri::ToString() const {
  std::string out = scheme + "://" + authority;
  if (scheme == "file") {
    out += PercentEncode(path, /*keep_slash=*/true);
  } else if (!path.empty()) {
    out += "/" + PercentEncode(path, /*keep_slash=*/true);
  }
  char separator = '?';
  for (const auto& [key, value] : query) {
    out += separator;
    out += PercentEncode(key, /*keep_slash=*/false);
    if (!value.empty()) out += "=" + PercentEncode(value, /*keep_slash=*/false);
    separator = '&';
  }
  return out;
}

Result<Uri> ParseUri(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("empty URI");
  const std::optional<std::string_view> scheme_text = SchemeOf(text);
  if (scheme_text) {
    std::string scheme = Lower(*scheme_text);
    const std::string_view rest = text.substr(scheme_text->size() + 1);
    if (rest.substr(0, 2) == "//") {
      if (!IsKnownScheme(scheme)) {
        return UriError(text, "unknown scheme '" + scheme + "' (expected s3, file or mem)");
      }
      return ParseHierarchical(text, std::move(scheme), rest.substr(2));
    }
    // RFC 8089 also allows "file:/abs/path" without the empty authority.
    if (scheme == "file" && !rest.empty() && rest[0] == '/') {
      return ParseHierarchical(text, std::move(scheme), rest);
    }
    // "s3:bucket/x" is a typo, not a file called that. Other "word:..." strings are file names.
    if (IsKnownScheme(scheme)) return UriError(text, "expected '//' after '" + scheme + ":'");
  }
  // A bare path is taken literally: '%' and '?' are legal in file names.
  Uri uri;
  uri.scheme = "file";
  REEL_ASSIGN_OR_RETURN(uri.path, AbsoluteNormalisedPath(text));
  return uri;
}

std::string PercentEncode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += kHexDigits[byte >> 4];
      out += kHexDigits[byte & 0xF];
    }
  }
  return out;
}

Result<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int high = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      return InvalidArgumentError("bad percent-encoding at offset " + std::to_string(i) + " in '" +
                                  std::string(text) + "'");
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

}  // namespace reel
