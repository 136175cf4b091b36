#include "base/hash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace reel {
namespace {

TEST(HashTest, Md5KnownVectors) {
  EXPECT_EQ(Md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Md5Hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(Md5Hex("The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6");
}

TEST(HashTest, Md5RawIsTheSixteenDigestBytes) {
  const std::string raw = Md5Raw("abc");
  EXPECT_EQ(raw.size(), 16u);
  EXPECT_EQ(HexEncode(raw), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(Base64Encode(Md5Raw("hello")), Md5Base64("hello"));
}

TEST(HashTest, Md5Base64IsContentMd5) {
  EXPECT_EQ(Md5Base64("hello"), "XUFAKrxLKna5cZ2REBfFkg==");
  EXPECT_EQ(Md5Base64(""), "1B2M2Y8AsgTpgAmY7PhCfg==");
}

TEST(HashTest, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(HashTest, Xxh3KnownVectors) {
  // Values printed by `xxhsum -H3` / `-H2` (xxHash 0.8).
  EXPECT_EQ(Xxh3_64(""), 0x2d06800538d394c2ULL);
  EXPECT_EQ(Xxh3_128Hex(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(Xxh3_128Hex("abc").size(), 32u);
  EXPECT_NE(Xxh3_64("abc"), Xxh3_64("abd"));
}

TEST(HashTest, HexEncode) {
  EXPECT_EQ(HexEncode(""), "");
  EXPECT_EQ(HexEncode(std::string("\x00\x01\xab\xff", 4)), "0001abff");
}

TEST(HashTest, HexDecodeInvertsHexEncodeAndRefusesNonHex) {
  EXPECT_EQ(HexDecode("0001abFF"), std::string("\x00\x01\xab\xff", 4));
  EXPECT_EQ(HexDecode(""), std::string());
  EXPECT_EQ(HexDecode(HexEncode(Sha256Raw("abc"))), Sha256Raw("abc"));
  EXPECT_EQ(HexDecode("abc"), std::nullopt);  // odd length
  EXPECT_EQ(HexDecode("zz"), std::nullopt);
  EXPECT_EQ(HexDecode("0g"), std::nullopt);
}

TEST(HashTest, Sha256RawIsTheDigestBytes) {
  EXPECT_EQ(Sha256Raw("abc").size(), 32u);
  EXPECT_EQ(HexEncode(Sha256Raw("abc")), Sha256Hex("abc"));
}

TEST(HashTest, Base64Encode) {
  // RFC 4648 section 10 test vectors: every padding case.
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(HashTest, Base64OfInputLargerThanOneChunk) {
  // 3 MiB + 2 bytes crosses the internal chunk boundary; the padding belongs only at the end.
  const std::string data(3 * 1024 * 1024 + 2, 'a');
  const std::string encoded = Base64Encode(data);
  ASSERT_EQ(encoded.size(), (data.size() + 2) / 3 * 4);
  EXPECT_EQ(encoded.substr(0, 8), "YWFhYWFh");
  EXPECT_EQ(encoded.substr(encoded.size() - 4), "YWE=");
  EXPECT_EQ(encoded.find('='), encoded.size() - 1);
}

std::string Incremental(Hasher::Kind kind, const std::string& data, size_t piece) {
  Hasher hasher(kind);
  for (size_t i = 0; i < data.size(); i += piece)
    hasher.Update(std::string_view(data).substr(i, piece));
  return hasher.FinishHex();
}

std::string Xxh3Hex(std::string_view data) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(Xxh3_64(data)));
  return buf;
}

TEST(HasherTest, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 5000; ++i) data += static_cast<char>(i * 31 + 7);
  for (size_t piece : {1u, 7u, 64u, 1000u, 5000u}) {
    SCOPED_TRACE(piece);
    EXPECT_EQ(Incremental(Hasher::Kind::kMd5, data, piece), Md5Hex(data));
    EXPECT_EQ(Incremental(Hasher::Kind::kSha256, data, piece), Sha256Hex(data));
    EXPECT_EQ(Incremental(Hasher::Kind::kXxh3_64, data, piece), Xxh3Hex(data));
  }
}

TEST(HasherTest, EmptyInputAndKnownValues) {
  EXPECT_EQ(Hasher(Hasher::Kind::kMd5).FinishHex(), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Hasher(Hasher::Kind::kXxh3_64).FinishHex(), "2d06800538d394c2");
  Hasher sha(Hasher::Kind::kSha256);
  sha.Update("a");
  sha.Update("");
  sha.Update("bc");
  EXPECT_EQ(sha.FinishHex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(HasherTest, SecondFinishReturnsSameDigest) {
  Hasher md5(Hasher::Kind::kMd5);
  md5.Update("abc");
  const std::string first = md5.FinishHex();
  EXPECT_EQ(first, "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5.FinishHex(), first);
}

TEST(HasherTest, Xxh3HexIsSixteenDigitsWithLeadingZeros) {
  // Whatever the value, the hex form is fixed width and lower case.
  for (const char* input : {"", "a", "abc", "0123456789"}) {
    Hasher hasher(Hasher::Kind::kXxh3_64);
    hasher.Update(input);
    const std::string hex = hasher.FinishHex();
    EXPECT_EQ(hex.size(), 16u);
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(std::stoull(hex, nullptr, 16), Xxh3_64(input));
  }
}

}  // namespace
}  // namespace reel
