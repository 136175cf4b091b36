#include "base/zstd.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "base/random.h"
#include "testing/status_matchers.h"

namespace reel {
namespace {

std::string Compress(std::string_view data, int level = 3) {
  std::string out;
  EXPECT_OK(ZstdCompressAppend(data, ZstdOptions{level}, &out));
  return out;
}

std::string Noisy(size_t n) {  // half random bytes, half runs: compressible but not trivially
  Rng rng(7);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i % 2 ? rng.UniformInt(256) : i / 64);
  return s;
}

TEST(ZstdTest, RoundTripsAndRecordsTheSize) {
  for (const std::string& data : {std::string(), std::string("a"), Noisy(100000)}) {
    const std::string frame = Compress(data);
    ASSERT_OK_AND_ASSIGN(uint64_t size, ZstdContentSize(frame, "t"));
    EXPECT_EQ(size, data.size());
    ASSERT_OK_AND_ASSIGN(std::string back, ZstdDecompress(frame, data.size(), "t"));
    EXPECT_EQ(back, data);
  }
}

TEST(ZstdTest, AppendsAfterWhatIsThere) {
  std::string out = "head";
  ASSERT_OK(ZstdCompressAppend("payload", ZstdOptions{}, &out));
  EXPECT_EQ(out.substr(0, 4), "head");
  ASSERT_OK_AND_ASSIGN(std::string back, ZstdDecompress(std::string_view(out).substr(4), 100, "t"));
  EXPECT_EQ(back, "payload");
}

TEST(ZstdTest, RejectsALevelZstdDoesNotTake) {
  std::string out = "keep";
  EXPECT_STATUS(ZstdCompressAppend("x", ZstdOptions{99}, &out), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, "keep");
}

// A small match-finder table is an encoder's choice: the frame decodes the same, and a caller
// after it on the same thread gets the level's own table again.
TEST(ZstdTest, ASmallHashTableRoundTripsAndIsNotKeptForTheNextCaller) {
  const std::string data = Noisy(200000);
  std::string small;
  ASSERT_OK(ZstdCompressAppend(data, ZstdOptions{1, 6}, &small));
  ASSERT_OK_AND_ASSIGN(std::string back, ZstdDecompress(small, data.size(), "t"));
  EXPECT_EQ(back, data);
  std::string after, fresh;
  ASSERT_OK(ZstdCompressAppend(data, ZstdOptions{1}, &after));
  std::thread([&] { EXPECT_OK(ZstdCompressAppend(data, ZstdOptions{1}, &fresh)); }).join();
  EXPECT_EQ(after, fresh) << "the hash_log of the call before stayed on this thread's context";
  std::string out = "keep";
  EXPECT_STATUS(ZstdCompressAppend("x", ZstdOptions{1, 2}, &out), StatusCode::kInvalidArgument);
  EXPECT_STATUS(ZstdCompressAppend("x", ZstdOptions{1, 99}, &out), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, "keep");
}

TEST(ZstdTest, DamagedFramesAreDataLossNamingTheSource) {
  const std::string frame = Compress(Noisy(5000));
  Result<std::string> truncated =
      ZstdDecompress(frame.substr(0, frame.size() - 3), 5000, "chunk 7");
  EXPECT_STATUS(truncated, StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("chunk 7"), std::string::npos);
  EXPECT_STATUS(ZstdDecompress(frame + "x", 5000, "t"), StatusCode::kDataLoss);
  EXPECT_STATUS(ZstdDecompress("not zstd at all", 5000, "t"), StatusCode::kDataLoss);
  // Every single flipped bit in the body is caught (zstd's checksum, or the frame's structure).
  for (size_t i = 6; i < frame.size(); i += 97) {
    std::string bad = frame;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    Result<std::string> r = ZstdDecompress(bad, 1 << 20, "t");
    EXPECT_STATUS(r, StatusCode::kDataLoss) << "flipped byte " << i;
  }
}

TEST(ZstdTest, RefusesToDecodeOverTheLimit) {
  const std::string frame = Compress(std::string(10000, 'z'));
  EXPECT_STATUS(ZstdDecompress(frame, 9999, "t"), StatusCode::kResourceExhausted);
  EXPECT_OK(ZstdDecompress(frame, 10000, "t"));
}

TEST(ZstdTest, DecodesIntoABufferOfExactlyTheFramesSize) {
  const std::string data = Noisy(5000);
  const std::string frame = Compress(data, 1);
  std::string out(data.size(), '\0');
  ASSERT_OK(ZstdDecompressInto(frame, out.data(), out.size(), "t"));
  EXPECT_EQ(out, data);
  // Twice on one thread: the thread's reused context starts clean each call.
  ASSERT_OK(ZstdDecompressInto(Compress("again", 9), out.data(), 5, "t"));
  EXPECT_EQ(out.substr(0, 5), "again");
  const Status wrong = ZstdDecompressInto(frame, out.data(), data.size() - 1, "chunk 3");
  EXPECT_STATUS(wrong, StatusCode::kDataLoss);
  EXPECT_NE(wrong.message().find("chunk 3"), std::string::npos) << wrong.ToString();
}

TEST(ZstdTest, OnlyACallerThatChecksTheBytesItselfSkipsTheChecksum) {
  const std::string data = Noisy(5000);
  std::string frame = Compress(data, 1);
  frame.back() = static_cast<char>(frame.back() ^ 1);  // the checksum is the frame's last 4 bytes
  std::string out(data.size(), '\0');
  EXPECT_STATUS(ZstdDecompressInto(frame, out.data(), out.size(), "t"), StatusCode::kDataLoss);
  ASSERT_OK(ZstdDecompressInto(frame, out.data(), out.size(), "t", ZstdChecksum::kSkip));
  EXPECT_EQ(out, data);
  // The thread's context is reused: the next call checks again.
  EXPECT_STATUS(ZstdDecompressInto(frame, out.data(), out.size(), "t"), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace reel
