#include "storage/s3_xml.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace reel::storage::s3 {
namespace {

// Finds the next <tag> or <tag attr...> opening at or after `from`; npos when none.
size_t FindOpen(std::string_view xml, std::string_view tag, size_t from, size_t* content_start) {
  while (true) {
    size_t lt = xml.find('<', from);
    if (lt == std::string_view::npos) return lt;
    size_t name_end = lt + 1 + tag.size();
    if (xml.compare(lt + 1, tag.size(), tag) == 0 && name_end < xml.size() &&
        (xml[name_end] == '>' || xml[name_end] == ' ')) {
      size_t gt = xml.find('>', name_end);
      if (gt == std::string_view::npos) return std::string_view::npos;
      *content_start = gt + 1;
      return lt;
    }
    from = lt + 1;
  }
}

}  // namespace

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while (true) {
    size_t content = 0;
    if (FindOpen(xml, tag, pos, &content) == std::string_view::npos) break;
    size_t end = xml.find(close, content);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(content, end - content));
    pos = end + close.size();
  }
  return out;
}

std::string XmlText(std::string_view xml, std::string_view tag) {
  std::string close = "</" + std::string(tag) + ">";
  size_t content = 0;
  if (FindOpen(xml, tag, 0, &content) == std::string_view::npos) return "";
  size_t end = xml.find(close, content);
  if (end == std::string_view::npos) return "";
  return XmlUnescape(xml.substr(content, end - content));
}

std::string XmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos) {
      out += text.substr(i);
      break;
    }
    std::string_view entity = text.substr(i + 1, semi - i - 1);
    if (entity == "amp")
      out += '&';
    else if (entity == "lt")
      out += '<';
    else if (entity == "gt")
      out += '>';
    else if (entity == "quot")
      out += '"';
    else if (entity == "apos")
      out += '\'';
    else if (entity.size() > 1 && entity[0] == '#') {
      bool hex = entity[1] == 'x' || entity[1] == 'X';
      std::string_view digits = entity.substr(hex ? 2 : 1);
      uint64_t code = 0;
      bool valid = !digits.empty() && digits.size() <= 8;
      for (char c : digits) {
        int value = -1;
        if (c >= '0' && c <= '9')
          value = c - '0';
        else if (hex && c >= 'a' && c <= 'f')
          value = c - 'a' + 10;
        else if (hex && c >= 'A' && c <= 'F')
          value = c - 'A' + 10;
        if (value < 0) {
          valid = false;
          break;
        }
        code = code * (hex ? 16 : 10) + static_cast<uint64_t>(value);
      }
      // XML allows no NUL, no surrogates and nothing past U+10FFFF.
      valid = valid && code != 0 && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF);
      if (!valid) {
        out += '&';  // malformed: keep as written
        continue;
      } else if (code < 0x80) {
        out += static_cast<char>(code);
      } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      }
    } else {
      // Unknown, or a bare '&' (a later ';' is not its end): keep it and go on scanning, so
      // that "AT&T &amp; co" still decodes the "&amp;".
      out += '&';
      continue;
    }
    i = semi;
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

S3Error ParseError(std::string_view body) {
  S3Error error;
  auto elements = XmlElements(body, "Error");
  if (elements.empty()) return error;
  error.code = XmlText(elements[0], "Code");
  error.message = XmlText(elements[0], "Message");
  error.resource = XmlText(elements[0], "Resource");
  return error;
}

int64_t ParseIso8601Ms(std::string_view text) {
  int year, month, day, hour, minute;
  double seconds;
  int consumed = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%lf%n", &year, &month, &day, &hour, &minute, &seconds,
                  &consumed) != 6) {
    return -1;
  }
  std::string_view zone = text.substr(static_cast<size_t>(consumed));
  if (!(zone.empty() || zone == "Z")) return -1;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || !(seconds >= 0 && seconds < 61)) {
    return -1;
  }
  struct tm tm = {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = 0;
  return static_cast<int64_t>(timegm(&tm)) * 1000 +
         static_cast<int64_t>(std::llround(seconds * 1000.0));
}

int64_t ParseHttpDateMs(std::string_view text) {
  struct tm tm = {};
  std::string s(text);
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr) return -1;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

Result<ListResult> ParseListObjectsV2(std::string_view body) {
  if (body.find("<ListBucketResult") == std::string_view::npos) {
    return InternalError("ListObjectsV2 answer is not a ListBucketResult: " +
                         std::string(body.substr(0, 200)));
  }
  ListResult result;
  for (std::string_view entry : XmlElements(body, "Contents")) {
    ObjectInfo info;
    info.key = XmlText(entry, "Key");
    std::string size = XmlText(entry, "Size");
    info.size = std::strtoull(size.c_str(), nullptr, 10);
    info.etag = XmlText(entry, "ETag");
    if (info.etag.size() >= 2 && info.etag.front() == '"' && info.etag.back() == '"') {
      info.etag = info.etag.substr(1, info.etag.size() - 2);
    }
    info.mtime_ms = ParseIso8601Ms(XmlText(entry, "LastModified"));
    result.objects.push_back(std::move(info));
  }
  for (std::string_view entry : XmlElements(body, "CommonPrefixes")) {
    result.common_prefixes.push_back(XmlText(entry, "Prefix"));
  }
  result.truncated = XmlText(body, "IsTruncated") == "true";
  result.next_token = XmlText(body, "NextContinuationToken");
  if (result.truncated && result.next_token.empty()) {
    return InternalError("ListObjectsV2 answer is truncated but has no NextContinuationToken");
  }
  return result;
}

std::string CompleteMultipartXml(const std::vector<std::string>& part_etags) {
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < part_etags.size(); ++i) {
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>\"" +
           XmlEscape(part_etags[i]) + "\"</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  return xml;
}

}  // namespace reel::storage::s3
