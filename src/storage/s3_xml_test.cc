// The S3 XML documents Reel reads and writes, on bodies shaped like what AWS and Ceph RGW send.
#include "storage/s3_xml.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace reel::storage::s3 {
namespace {

TEST(S3XmlTest, ParseErrorOfARealErrorBody) {
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
      "<Key>data/a&amp;b.tar</Key><BucketName>reel-data</BucketName>"
      "<Resource>/reel-data/data/a&amp;b.tar</Resource>"
      "<RequestId>tx00000a1b2c3d4e5f6-0065e1f2a3-1234-default</RequestId>"
      "<HostId>1234-default-default</HostId></Error>";
  S3Error error = ParseError(body);
  EXPECT_EQ(error.code, "NoSuchKey");
  EXPECT_EQ(error.message, "The specified key does not exist.");
  EXPECT_EQ(error.resource, "/reel-data/data/a&b.tar");
}

TEST(S3XmlTest, ParseErrorOfOtherBodies) {
  EXPECT_EQ(ParseError("").code, "");
  EXPECT_EQ(ParseError("<html><body>502 Bad Gateway</body></html>").code, "");
  EXPECT_EQ(ParseError("<ListBucketResult><Name>b</Name></ListBucketResult>").code, "");
  S3Error denied = ParseError(
      "<Error>\n  <Code>SignatureDoesNotMatch</Code>\n  <Message>The request signature we "
      "calculated does not match the signature you provided.</Message>\n</Error>\n");
  EXPECT_EQ(denied.code, "SignatureDoesNotMatch");
  EXPECT_EQ(denied.resource, "");
}

const char kListBody[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>reel-data</Name><Prefix>ds/</Prefix><KeyCount>4</KeyCount><MaxKeys>4</MaxKeys>"
    "<Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
    "<ContinuationToken>prev</ContinuationToken>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;x</"
    "NextContinuationToken>"
    "<Contents><Key>ds/a&amp;b.tar</Key><LastModified>2026-11-29T16:20:01.123Z</LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>1234</Size>"
    "<Owner><ID>owner-id</ID><DisplayName>Owner</DisplayName></Owner>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>ds/big.tar</Key><LastModified>2000-02-29T12:00:00.000Z</LastModified>"
    "<ETag>\"d41d8cd98f00b204e9800998ecf8427e-12\"</ETag><Size>201326592</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<CommonPrefixes><Prefix>ds/dir1/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>ds/dir&lt;2&gt;/</Prefix></CommonPrefixes>"
    "</ListBucketResult>";

TEST(S3XmlTest, ParseListObjectsV2) {
  auto result = ParseListObjectsV2(kListBody);
  ASSERT_OK(result);
  ASSERT_EQ(result->objects.size(), 2u);
  const ObjectInfo& first = result->objects[0];
  EXPECT_EQ(first.key, "ds/a&b.tar");
  EXPECT_EQ(first.size, 1234u);
  EXPECT_EQ(first.etag, "9b2cf535f27731c974343645a3985328");
  // 2026-11-29 is day 20786 after the epoch: (56 * 365 + 14 leap days) + 332.
  EXPECT_EQ(first.mtime_ms, (20786LL * 86400 + 16 * 3600 + 20 * 60 + 1) * 1000 + 123);
  const ObjectInfo& second = result->objects[1];
  EXPECT_EQ(second.key, "ds/big.tar");
  EXPECT_EQ(second.size, 201326592u);
  EXPECT_EQ(second.etag, "d41d8cd98f00b204e9800998ecf8427e-12");
  // 2000-02-29 is day 11016: (30 * 365 + 7 leap days) + 31 + 28.
  EXPECT_EQ(second.mtime_ms, (11016LL * 86400 + 12 * 3600) * 1000);
  EXPECT_EQ(result->common_prefixes, (std::vector<std::string>{"ds/dir1/", "ds/dir<2>/"}));
  EXPECT_TRUE(result->truncated);
  EXPECT_EQ(result->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&x");
}

TEST(S3XmlTest, ParseListObjectsV2LastAndEmptyPages) {
  auto empty = ParseListObjectsV2(
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<Prefix>none/</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>"
      "<IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_TRUE(empty->common_prefixes.empty());
  EXPECT_FALSE(empty->truncated);
  EXPECT_EQ(empty->next_token, "");

  auto last = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>k</Key><Size>0</Size><ETag>\"e\"</ETag>"
      "<LastModified>1970-01-01T00:00:00.000Z</LastModified></Contents></ListBucketResult>");
  ASSERT_OK(last);
  ASSERT_EQ(last->objects.size(), 1u);
  EXPECT_EQ(last->objects[0].key, "k");
  EXPECT_EQ(last->objects[0].size, 0u);
  EXPECT_EQ(last->objects[0].etag, "e");
  EXPECT_EQ(last->objects[0].mtime_ms, 0);
  EXPECT_FALSE(last->truncated);
}

TEST(S3XmlTest, ParseListObjectsV2RefusesBadAnswers) {
  // Truncated without a token: following it would loop or stop early.
  auto no_token = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>true</IsTruncated>"
      "<Contents><Key>k</Key><Size>1</Size></Contents></ListBucketResult>");
  EXPECT_FALSE(no_token.ok());
  EXPECT_STATUS(no_token, StatusCode::kInternal);

  auto error_body = ParseListObjectsV2(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchBucket</Code>"
      "<Message>The specified bucket does not exist</Message></Error>");
  EXPECT_FALSE(error_body.ok());
  EXPECT_FALSE(ParseListObjectsV2("").ok());
  EXPECT_FALSE(ParseListObjectsV2("<html>proxy login</html>").ok());
}

TEST(S3XmlTest, XmlTextAndElements) {
  const std::string xml =
      "<R><KeyCount>2</KeyCount><Key>first</Key><Part n=\"1\">a</Part><Part>b</Part>"
      "<Key>second</Key></R>";
  EXPECT_EQ(XmlText(xml, "Key"), "first");  // not KeyCount
  EXPECT_EQ(XmlText(xml, "KeyCount"), "2");
  EXPECT_EQ(XmlText(xml, "Missing"), "");
  EXPECT_EQ(XmlText("<Key>unterminated", "Key"), "");
  std::vector<std::string_view> parts = XmlElements(xml, "Part");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], "a");
  EXPECT_EQ(parts[1], "b");
  EXPECT_TRUE(XmlElements(xml, "Nothing").empty());
  EXPECT_EQ(XmlElements(xml, "Key").size(), 2u);
}

TEST(S3XmlTest, ParseIso8601Ms) {
  EXPECT_EQ(ParseIso8601Ms("1970-01-01T00:00:00.000Z"), 0);
  EXPECT_EQ(ParseIso8601Ms("1970-01-02T00:00:01Z"), 86401000);
  EXPECT_EQ(ParseIso8601Ms("2026-11-29T16:20:01.123Z"), 1795969201123);
  EXPECT_EQ(ParseIso8601Ms("2026-11-29T16:20:01.999Z"), 1795969201999);
  EXPECT_EQ(ParseIso8601Ms("2000-02-29T12:00:00Z"), 951825600000);
  EXPECT_EQ(ParseIso8601Ms(""), -1);
  EXPECT_EQ(ParseIso8601Ms("yesterday"), -1);
  EXPECT_EQ(ParseIso8601Ms("2026-11-29"), -1);
  EXPECT_EQ(ParseIso8601Ms("2026-13-45T99:99:99Z"), -1);
}

TEST(S3XmlTest, ParseHttpDateMs) {
  EXPECT_EQ(ParseHttpDateMs("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_EQ(ParseHttpDateMs("Sun, 29 Nov 2026 16:20:01 GMT"), 1795969201000);
  EXPECT_EQ(ParseHttpDateMs("Tue, 29 Feb 2000 12:00:00 GMT"), 951825600000);
  EXPECT_EQ(ParseHttpDateMs(""), -1);
  EXPECT_EQ(ParseHttpDateMs("2026-11-29T16:20:01Z"), -1);
}

TEST(S3XmlTest, CompleteMultipartXmlListsPartsInOrder) {
  std::string xml = CompleteMultipartXml({"etag-one", "etag-two", "a&b"});
  EXPECT_EQ(xml.rfind("<CompleteMultipartUpload>", 0), 0u);
  EXPECT_NE(xml.find("</CompleteMultipartUpload>"), std::string::npos);
  std::vector<std::string_view> parts = XmlElements(xml, "Part");
  ASSERT_EQ(parts.size(), 3u);
  const char* etags[] = {"\"etag-one\"", "\"etag-two\"", "\"a&b\""};
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(XmlText(parts[i], "PartNumber"), std::to_string(i + 1));
    EXPECT_EQ(XmlText(parts[i], "ETag"), etags[i]);
  }
  EXPECT_NE(xml.find("<Part><PartNumber>1</PartNumber><ETag>\"etag-one\"</ETag></Part>"
                     "<Part><PartNumber>2</PartNumber>"),
            std::string::npos);
  EXPECT_NE(xml.find("a&amp;b"), std::string::npos);
  EXPECT_EQ(CompleteMultipartXml({}), "<CompleteMultipartUpload></CompleteMultipartUpload>");
}

TEST(S3XmlTest, XmlUnescape) {
  EXPECT_EQ(XmlUnescape("&lt;a&gt; &amp; &quot;q&quot; &apos;s&apos;"), "<a> & \"q\" 's'");
  EXPECT_EQ(XmlUnescape("caf&#233;"), "caf\xC3\xA9");
  EXPECT_EQ(XmlUnescape("caf&#xE9;"), "caf\xC3\xA9");
  EXPECT_EQ(XmlUnescape("&#65;&#x42;"), "AB");
  EXPECT_EQ(XmlUnescape("&#x20AC;"), "\xE2\x82\xAC");
  EXPECT_EQ(XmlUnescape("&#x1F600;"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(XmlUnescape("no entities"), "no entities");
  EXPECT_EQ(XmlUnescape("&unknown; stays"), "&unknown; stays");
  EXPECT_EQ(XmlUnescape("AT&T"), "AT&T");
  EXPECT_EQ(XmlUnescape("AT&T &amp; co;"), "AT&T & co;");  // a bare '&' does not swallow "&amp;"
  EXPECT_EQ(XmlUnescape("&amp;amp;"), "&amp;");            // decoded once
  EXPECT_EQ(XmlUnescape("&&lt;"), "&<");
  // Malformed numeric references are kept as written, never turned into NUL or junk bytes.
  EXPECT_EQ(XmlUnescape("&#xZZ;"), "&#xZZ;");
  EXPECT_EQ(XmlUnescape("&#;"), "&#;");
  EXPECT_EQ(XmlUnescape("&#0;"), "&#0;");
  EXPECT_EQ(XmlUnescape("&#12a;"), "&#12a;");
  EXPECT_EQ(XmlUnescape("&#x110000;"), "&#x110000;");
}

TEST(S3XmlTest, XmlEscapeRoundTrips) {
  std::string text = "a<b>&\"c\"'d' \xC3\xA9";
  EXPECT_EQ(XmlEscape(text), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos; \xC3\xA9");
  EXPECT_EQ(XmlUnescape(XmlEscape(text)), text);
}

}  // namespace
}  // namespace reel::storage::s3
