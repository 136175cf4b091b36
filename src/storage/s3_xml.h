// Internal to storage: the few S3 XML documents Reel reads (error bodies, ListObjectsV2,
// InitiateMultipartUpload) and writes (CompleteMultipartUpload). S3's XML is flat and
// machine-written, so a tag scanner with entity decoding is enough; no DTDs, no namespaces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/object_store.h"

namespace reel::storage::s3 {

// Text of the first <tag>...</tag> inside `xml`, entities decoded; "" when absent.
std::string XmlText(std::string_view xml, std::string_view tag);
// Raw inner XML of every <tag>...</tag> in order.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);
// &amp; &lt; &gt; &quot; &apos; and numeric references.
std::string XmlUnescape(std::string_view text);
std::string XmlEscape(std::string_view text);

struct S3Error {
  std::string code;  // "NoSuchKey"; "" when the body is not an S3 error document
  std::string message;
  std::string resource;
};
S3Error ParseError(std::string_view body);

// ListObjectsV2 result. Keys are returned as the server gave them (prefix not stripped).
struct ListResult {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_token;
};
Result<ListResult> ParseListObjectsV2(std::string_view body);

// "2026-11-29T16:20:01.123Z" -> ms since epoch; -1 when malformed.
int64_t ParseIso8601Ms(std::string_view text);
// "Sun, 29 Nov 2026 16:20:01 GMT" -> ms since epoch; -1 when malformed.
int64_t ParseHttpDateMs(std::string_view text);

std::string CompleteMultipartXml(const std::vector<std::string>& part_etags);

}  // namespace reel::storage::s3
