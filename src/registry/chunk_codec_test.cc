#include "registry/chunk_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/hash.h"
#include "base/random.h"
#include "testing/status_matchers.h"

namespace reel::registry {
namespace {

std::string RandomBytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng.UniformInt(256));
  return s;
}

// n float32 weights of a trained-looking layer: roughly N(0, 0.05).
std::vector<float> Weights(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(n);
  for (float& x : w) x = static_cast<float>(0.05 * (rng.Uniform() + rng.Uniform() - 1.0));
  return w;
}

// What a fine-tune does to them: every weight moves by a relative `step`.
std::vector<float> FineTuned(std::vector<float> w, double step, uint64_t seed) {
  Rng rng(seed);
  for (float& x : w) x = static_cast<float>(x * (1.0 + step * (2 * rng.Uniform() - 1)));
  return w;
}

std::string AsBytes(const std::vector<float>& w) {
  std::string s(w.size() * sizeof(float), '\0');
  std::memcpy(s.data(), w.data(), s.size());
  return s;
}

TEST(ChunkCodecTest, FullChunksRoundTripForEveryWidth) {
  for (int width : {1, 2, 4, 8}) {
    const std::string raw = RandomBytes(8 * 1001, width);
    ASSERT_OK_AND_ASSIGN(std::string enc, EncodeChunk(raw, width, nullptr));
    ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(enc, "c"));
    EXPECT_EQ(h.form, ChunkForm::kFull);
    EXPECT_EQ(h.element_width, width);
    EXPECT_EQ(h.raw_size, raw.size());
    EXPECT_TRUE(h.base_sha256.empty());
    ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(enc, "", "c"));
    EXPECT_EQ(back, raw) << "width " << width;
  }
}

TEST(ChunkCodecTest, DeltasRoundTripBitExactAndNameTheirBase) {
  const std::string base = AsBytes(Weights(50000, 1));
  const std::string raw = AsBytes(FineTuned(Weights(50000, 1), 1e-3, 2));
  const DeltaBase b{base, 2};
  ASSERT_OK_AND_ASSIGN(std::string enc, EncodeChunk(raw, 4, &b));
  ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(enc, "c"));
  EXPECT_EQ(h.form, ChunkForm::kDelta);
  EXPECT_EQ(h.depth, 3);
  EXPECT_EQ(h.base_sha256, Sha256Hex(base));
  ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(enc, base, "c"));
  EXPECT_EQ(back, raw);
}

TEST(ChunkCodecTest, AFineTunedChunkStoresSmallAgainstItsParent) {
  const std::vector<float> parent = Weights(250000, 3);  // 1 MB
  const std::string base = AsBytes(parent), raw = AsBytes(FineTuned(parent, 1e-3, 4));
  const DeltaBase b{base, 0};
  ASSERT_OK_AND_ASSIGN(std::string full, EncodeChunk(raw, 4, nullptr));
  ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk(raw, 4, &b));
  // Sign, exponent and the high mantissa bits do not change: about half the bytes are left.
  EXPECT_LT(delta.size(), 0.65 * raw.size()) << delta.size() << " of " << raw.size();
  EXPECT_LT(delta.size(), 0.8 * full.size());
  // Planes help a chunk alone too: the exponent bytes of similar weights repeat.
  EXPECT_LT(full.size(), 0.95 * raw.size());
  // An unchanged chunk costs almost nothing as a delta.
  ASSERT_OK_AND_ASSIGN(std::string same, EncodeChunk(base, 4, &b));
  EXPECT_LT(same.size(), 200u);
}

TEST(ChunkCodecTest, BadArgumentsAreRefused) {
  EXPECT_STATUS(EncodeChunk("abc", 3, nullptr), StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeChunk("abc", 2, nullptr), StatusCode::kInvalidArgument);
  const DeltaBase short_base{"ab", 0}, deepest{"wxyz", kMaxChunkDepth}, base{"wxyz", 0};
  EXPECT_STATUS(EncodeChunk("abcd", 2, &short_base), StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeChunk("abcd", 2, &deepest), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::string full, EncodeChunk("abcd", 2, nullptr));
  EXPECT_STATUS(DecodeChunk(full, "abcd", "c"), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk("abcd", 2, &base));
  EXPECT_STATUS(DecodeChunk(delta, "", "c"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(DecodeChunk(delta, "xyz", "c"), StatusCode::kInvalidArgument);
}

TEST(ChunkCodecTest, DamagedChunksAreDataLossNamingTheChunk) {
  const std::string raw = AsBytes(Weights(4000, 5));
  ASSERT_OK_AND_ASSIGN(std::string enc, EncodeChunk(raw, 4, nullptr));
  Result<std::string> truncated =
      DecodeChunk(enc.substr(0, enc.size() - 5), "", "tensor w chunk 2");
  EXPECT_STATUS(truncated, StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("tensor w chunk 2"), std::string::npos);
  EXPECT_STATUS(DecodeChunk(enc.substr(0, 10), "", "c"), StatusCode::kDataLoss);
  EXPECT_STATUS(DecodeChunk("XKC1" + enc.substr(4), "", "c"), StatusCode::kDataLoss);
  EXPECT_STATUS(DecodeChunk("RKC2" + enc.substr(4), "", "c"), StatusCode::kFailedPrecondition);
  std::string bad = enc;
  bad[4] = 7;  // form
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  bad = enc;
  bad[5] = 3;  // width
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  bad = enc;
  bad[6] = 1;  // a full chunk with a depth
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  bad = enc;
  bad[8] = static_cast<char>(bad[8] ^ 4);  // raw size, no longer what the frame holds
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  for (size_t i = 20; i < enc.size(); i += 211) {
    bad = enc;
    bad[i] = static_cast<char>(bad[i] ^ 1);
    EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss) << "flipped byte " << i;
  }
}

}  // namespace
}  // namespace reel::registry
