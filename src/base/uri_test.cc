#include "base/uri.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "testing/status_matchers.h"

namespace reel {
namespace {

Uri Parse(std::string_view text) {
  auto uri = ParseUri(text);
  EXPECT_OK(uri) << text << ": " << uri.status().ToString();
  return uri.ok() ? std::move(uri).value() : Uri{};
}

std::string Cwd() {
  char buf[PATH_MAX];
  EXPECT_NE(getcwd(buf, sizeof(buf)), nullptr);
  return buf;
}

void ExpectInvalid(std::string_view text, std::string_view needle) {
  auto uri = ParseUri(text);
  ASSERT_FALSE(uri.ok()) << text << " parsed as " << uri->ToString();
  EXPECT_STATUS(uri, StatusCode::kInvalidArgument) << text;
  EXPECT_NE(uri.status().message().find(needle), std::string::npos)
      << text << ": " << uri.status().message();
}

TEST(UriTest, S3BucketAndPrefix) {
  Uri uri = Parse("s3://my-bucket/data/shards/");
  EXPECT_EQ(uri.scheme, "s3");
  EXPECT_EQ(uri.authority, "my-bucket");
  EXPECT_EQ(uri.path, "data/shards/");  // trailing '/' kept
  EXPECT_TRUE(uri.query.empty());
  EXPECT_EQ(uri.ToString(), "s3://my-bucket/data/shards/");
}

TEST(UriTest, S3WithoutPath) {
  EXPECT_EQ(Parse("s3://bucket").path, "");
  EXPECT_EQ(Parse("s3://bucket/").path, "");
  EXPECT_EQ(Parse("s3://bucket").ToString(), "s3://bucket");
  EXPECT_EQ(Parse("s3://bucket//x").path, "x");  // never a leading '/'
}

TEST(UriTest, SchemeIsCaseInsensitive) {
  Uri uri = Parse("S3://bucket/k");
  EXPECT_EQ(uri.scheme, "s3");
  EXPECT_EQ(Parse("FILE:///x").scheme, "file");
}

TEST(UriTest, S3PercentDecodingAndRoundTrip) {
  Uri uri = Parse("s3://bucket/a%20b/c%2Bd");
  EXPECT_EQ(uri.path, "a b/c+d");
  EXPECT_EQ(uri.ToString(), "s3://bucket/a%20b/c%2Bd");
  EXPECT_EQ(Parse(uri.ToString()).path, uri.path);
}

TEST(UriTest, BucketNameRules) {
  EXPECT_EQ(Parse("s3://abc/x").authority, "abc");
  EXPECT_EQ(Parse("s3://a.b-c.1/x").authority, "a.b-c.1");
  EXPECT_EQ(Parse("s3://" + std::string(63, 'a')).authority, std::string(63, 'a'));
  ExpectInvalid("s3://ab/x", "invalid bucket name 'ab'");
  ExpectInvalid("s3://" + std::string(64, 'a'), "invalid bucket name");
  ExpectInvalid("s3://MyBucket/x", "invalid bucket name 'MyBucket'");
  ExpectInvalid("s3://my_bucket/x", "invalid bucket name");
  ExpectInvalid("s3://-bucket/x", "invalid bucket name");
  ExpectInvalid("s3://bucket-/x", "invalid bucket name");
  ExpectInvalid("s3://.bucket/x", "invalid bucket name");
  ExpectInvalid("s3://bucket./x", "invalid bucket name");
}

TEST(UriTest, S3WithoutBucket) {
  ExpectInvalid("s3://", "s3 URI without a bucket");
  ExpectInvalid("s3:///key", "s3 URI without a bucket");
  ExpectInvalid("s3://?a=1", "s3 URI without a bucket");
}

TEST(UriTest, FileUriNormalisesLexically) {
  Uri uri = Parse("file:///a/b/../c");
  EXPECT_EQ(uri.scheme, "file");
  EXPECT_EQ(uri.authority, "");
  EXPECT_EQ(uri.path, "/a/c");
  EXPECT_EQ(uri.ToString(), "file:///a/c");
  EXPECT_EQ(Parse("file:///a/./b//c/").path, "/a/b/c");
  EXPECT_EQ(Parse("file:///../../x").path, "/x");  // ".." stops at the root
  EXPECT_EQ(Parse("file:///").path, "/");
  EXPECT_EQ(Parse("file://localhost/etc/x").path, "/etc/x");
  EXPECT_EQ(Parse("file:/etc/x").path, "/etc/x");
}

TEST(UriTest, FileUriPercentDecoding) {
  Uri uri = Parse("file:///tmp/my%20file");
  EXPECT_EQ(uri.path, "/tmp/my file");
  EXPECT_EQ(uri.ToString(), "file:///tmp/my%20file");
}

TEST(UriTest, FileUriErrors) {
  ExpectInvalid("file://", "file URI without a path");
  ExpectInvalid("file://data/x", "file URIs take no host ('data')");
  ExpectInvalid("file:///a/%zz", "bad percent-encoding");
}

TEST(UriTest, AbsoluteBarePath) {
  Uri uri = Parse("/data/./x/../y/");
  EXPECT_EQ(uri.scheme, "file");
  EXPECT_EQ(uri.path, "/data/y");
  EXPECT_EQ(uri.ToString(), "file:///data/y");
}

TEST(UriTest, RelativePathsResolveAgainstCwd) {
  const std::string cwd = Cwd();
  EXPECT_EQ(Parse("rel/path").path, cwd + "/rel/path");
  EXPECT_EQ(Parse(".").path, cwd);
  EXPECT_EQ(Parse("./a/../b").path, cwd + "/b");
  // Not a known scheme, so an ordinary (if odd) file name.
  EXPECT_EQ(Parse("notes:today").path, cwd + "/notes:today");
}

TEST(UriTest, BarePathsAreLiteral) {
  // '%' and '?' are legal in file names; only URIs are decoded.
  Uri uri = Parse("/tmp/100%/a?b=1");
  EXPECT_EQ(uri.path, "/tmp/100%/a?b=1");
  EXPECT_TRUE(uri.query.empty());
}

TEST(UriTest, MemUri) {
  Uri uri = Parse("mem://scratch/a/b");
  EXPECT_EQ(uri.scheme, "mem");
  EXPECT_EQ(uri.authority, "scratch");
  EXPECT_EQ(uri.path, "a/b");
  EXPECT_EQ(uri.ToString(), "mem://scratch/a/b");
  EXPECT_EQ(Parse("mem://scratch").path, "");
}

TEST(UriTest, QueryParsing) {
  Uri uri = Parse("s3://bucket/p?a=1&b&c=x%20y&&d=");
  EXPECT_EQ(uri.path, "p");
  EXPECT_EQ(uri.query.size(), 4u);
  EXPECT_EQ(uri.query.at("a"), "1");
  EXPECT_EQ(uri.query.at("b"), "");
  EXPECT_EQ(uri.query.at("c"), "x y");
  EXPECT_EQ(uri.query.at("d"), "");
  EXPECT_EQ(uri.ToString(), "s3://bucket/p?a=1&b&c=x%20y&d");
  EXPECT_EQ(Parse("s3://bucket?region=eu-west-1").query.at("region"), "eu-west-1");
  EXPECT_EQ(Parse("s3://bucket?region=eu-west-1").authority, "bucket");
  EXPECT_EQ(Parse("s3://bucket/p?a=1&a=2").query.at("a"), "2");
  ExpectInvalid("s3://bucket/p?a=%G0", "bad percent-encoding");
}

TEST(UriTest, RejectsBadInputs) {
  ExpectInvalid("", "empty URI");
  ExpectInvalid("http://example.com/x", "unknown scheme 'http'");
  ExpectInvalid("gs://bucket/x", "unknown scheme 'gs'");
  ExpectInvalid("s3:bucket/x", "expected '//' after 's3:'");
  ExpectInvalid("mem:x", "expected '//' after 'mem:'");
  ExpectInvalid("s3://bucket/a%2", "bad percent-encoding");
  ExpectInvalid("s3://bucket/a%", "bad percent-encoding");
}

TEST(UriTest, ErrorsQuoteTheInput) {
  auto uri = ParseUri("s3://Bad/x");
  ASSERT_FALSE(uri.ok());
  EXPECT_EQ(uri.status().message().rfind("invalid URI 's3://Bad/x': ", 0), 0u)
      << uri.status().message();
}

TEST(PercentEncodeTest, UnreservedPassThroughEverythingElseUpperHex) {
  EXPECT_EQ(PercentEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(PercentEncode("a b/c", false), "a%20b%2Fc");
  EXPECT_EQ(PercentEncode("a b/c", true), "a%20b/c");
  EXPECT_EQ(PercentEncode("=&+*", false), "%3D%26%2B%2A");
  EXPECT_EQ(PercentEncode("\xc3\xa9", false), "%C3%A9");  // UTF-8 bytes, not code points
  EXPECT_EQ(PercentEncode(std::string("\0", 1), false), "%00");
}

TEST(PercentDecodeTest, DecodesBothCasesAndRejectsBadEscapes) {
  EXPECT_EQ(*PercentDecode("a%20b%2fc%2F"), "a b/c/");
  EXPECT_EQ(*PercentDecode("%C3%a9"), "\xc3\xa9");
  EXPECT_EQ(*PercentDecode("plus+stays"), "plus+stays");
  EXPECT_EQ(*PercentDecode(""), "");
  for (const char* bad : {"%", "%4", "a%zz", "%g0", "%0g"}) {
    auto decoded = PercentDecode(bad);
    EXPECT_FALSE(decoded.ok()) << bad;
    EXPECT_STATUS(decoded, StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(PercentDecode("ab%4").status().message(), "bad percent-encoding at offset 2 in 'ab%4'");
}

TEST(PercentEncodeTest, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(*PercentDecode(PercentEncode(all, false)), all);
  EXPECT_EQ(*PercentDecode(PercentEncode(all, true)), all);
}

}  // namespace
}  // namespace reel
