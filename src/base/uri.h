// Storage URIs: "s3://bucket/prefix", "file:///abs/path", "/abs/path", "rel/path", "mem://name".
// Thread-safety: plain value type.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace reel {

struct Uri {
  std::string scheme;     // "s3", "file", "mem"; a bare path parses as "file"
  std::string authority;  // bucket for s3, name for mem, empty for file
  std::string path;       // for file: an absolute, normalised path; for s3/mem: the key prefix
                          // without a leading '/', trailing '/' kept
  std::map<std::string, std::string> query;  // "?a=1&b" -> {a:1, b:""}, percent-decoded

  std::string ToString() const;  // canonical form: "s3://bucket/path", "file:///path"
};

// Errors: InvalidArgument for an empty string, an unknown scheme, an s3 URI without a bucket or
// an invalid bucket name, bad percent-encoding.
// Relative file paths are made absolute against the current directory.
Result<Uri> ParseUri(std::string_view text);

// RFC 3986 percent-encoding of everything but unreserved characters (A-Z a-z 0-9 - _ . ~),
// and '/' too when keep_slash. Upper-case hex, as SigV4 requires.
std::string PercentEncode(std::string_view text, bool keep_slash);
// Errors: InvalidArgument on a truncated or non-hex escape.
Result<std::string> PercentDecode(std::string_view text);

}  // namespace reel
