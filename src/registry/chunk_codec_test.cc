#include "registry/chunk_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/hash.h"
#include "base/random.h"
#include "base/zstd.h"
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

// fn(x, y) of each pair of elements of `width` bytes (little-endian integers), kept to the width.
std::string ElementWise(std::string_view a, std::string_view b, int width,
                        const std::function<uint64_t(uint64_t, uint64_t, uint64_t)>& fn) {
  const int bits = 8 * width;
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  std::string out(a.size(), '\0');
  for (size_t i = 0; i < a.size(); i += width) {
    uint64_t x = 0, y = 0;
    std::memcpy(&x, a.data() + i, width);
    std::memcpy(&y, b.data() + i, width);
    const uint64_t v = fn(x, y, mask) & mask;
    std::memcpy(out.data() + i, &v, width);
  }
  return out;
}

// zigzag(a - b), as the header documents: 0, -1, 1, -2 -> 0, 1, 2, 3.
std::string ZigZagDifference(std::string_view a, std::string_view b, int width) {
  const uint64_t sign_bit = uint64_t{1} << (8 * width - 1);
  return ElementWise(a, b, width, [sign_bit](uint64_t x, uint64_t y, uint64_t mask) {
    const uint64_t d = (x - y) & mask;
    return (d << 1) ^ ((d & sign_bit) != 0 ? mask : 0);
  });
}

// a + (a - b): what a linear delta predicts.
std::string Extrapolated(std::string_view a, std::string_view b, int width) {
  return ElementWise(a, b, width, [](uint64_t x, uint64_t y, uint64_t) { return 2 * x - y; });
}

std::string Planes(std::string_view bytes, int width) {
  const size_t n = bytes.size() / width;
  std::string out(bytes.size(), '\0');
  for (size_t i = 0; i < n; ++i) {
    for (int p = 0; p < width; ++p) out[p * n + i] = bytes[i * width + p];
  }
  return out;
}

// The stored bytes are the documented layout, whichever kernel made them (chunks written by one
// build are read by another): zstd of every element's byte 0, then byte 1, and so on, of the raw
// bytes, of raw XOR base, of zigzag(raw - base), or of zigzag(raw - (2 base - before)).
TEST(ChunkCodecTest, PlanesAreTheDocumentedLayout) {
  for (int width : {1, 2, 4, 8}) {
    const size_t n = 1000 + 13;  // SIMD blocks and a tail
    const std::string raw = RandomBytes(n * width, 40 + width);
    const std::string base = RandomBytes(n * width, 50 + width);
    const std::string before = RandomBytes(n * width, 60 + width);
    std::string xored(raw.size(), '\0');
    for (size_t i = 0; i < raw.size(); ++i) xored[i] = static_cast<char>(raw[i] ^ base[i]);
    struct Form {
      DeltaCoding coding;
      ChunkForm form;
      std::string want;  // the planes
    };
    const std::vector<Form> forms = {
        {DeltaCoding::kXorDelta, ChunkForm::kXorDelta, Planes(xored, width)},
        {DeltaCoding::kDifference, ChunkForm::kDifference,
         Planes(ZigZagDifference(raw, base, width), width)},
        {DeltaCoding::kLinear, ChunkForm::kLinear,
         Planes(ZigZagDifference(raw, Extrapolated(base, before, width), width), width)}};
    ASSERT_OK_AND_ASSIGN(std::string full, EncodeChunk(raw, width, nullptr));
    ASSERT_OK_AND_ASSIGN(std::string full_planes, ZstdDecompress(full.substr(16), raw.size(), "c"));
    EXPECT_EQ(full_planes, Planes(raw, width)) << "width " << width;
    for (const Form& f : forms) {
      const bool linear = f.form == ChunkForm::kLinear;
      const DeltaBase b{base, 1, {}, linear ? std::string_view(before) : ""};
      ChunkEncodeOptions options;
      options.coding = f.coding;
      ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk(raw, width, &b, options));
      ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(delta, "c"));
      EXPECT_EQ(h.form, f.form);
      EXPECT_EQ(delta.substr(0, 4), f.form == ChunkForm::kXorDelta ? "RKC1" : "RKC2");
      ASSERT_OK_AND_ASSIGN(std::string planes,
                           ZstdDecompress(delta.substr(16 + 32), raw.size(), "c"));
      EXPECT_EQ(planes, f.want) << "width " << width << ", form " << int(f.form);
      ASSERT_OK_AND_ASSIGN(std::string back,
                           DecodeChunk(delta, base, "c", linear ? std::string_view(before) : ""));
      EXPECT_EQ(back, raw) << "width " << width << ", form " << int(f.form);
    }
  }
}

// A four-byte delta that kAuto groups: its planes are those of the zigzagged residuals taken in
// the documented order, every element of class 0 first (in element order), then class 1, and so
// on; a class is the base's exponent band, plus 8 x the band of its own step where the base's
// base is given (written here as chunk_codec.cc's comment says, not as its code does it).
TEST(ChunkCodecTest, GroupedDeltasAreTheDocumentedLayout) {
  const size_t n = 5000 + 7;
  const std::vector<float> before_w = Weights(n, 70);
  const std::vector<float> base_w = FineTuned(before_w, 1e-2, 71);
  const std::vector<float> raw_w = FineTuned(base_w, 1e-2, 72);
  const std::string raw = AsBytes(raw_w), base = AsBytes(base_w), before = AsBytes(before_w);
  const auto word = [](const std::string& bytes, size_t i) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  };
  // The exponent field of float(int32(base - before)), in bands of two binades from 2^-2.
  const auto step_band = [](uint32_t base, uint32_t before) {
    const auto step = static_cast<float>(static_cast<int32_t>(base - before));
    uint32_t bits;
    std::memcpy(&bits, &step, 4);
    return std::clamp((static_cast<int>(bits >> 23 & 0xff) - 125) / 2, 0, 15);
  };
  for (const bool with_before : {false, true}) {
    const DeltaBase b{base, 1, {}, with_before ? std::string_view(before) : ""};
    ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk(raw, 4, &b));
    ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(delta, "c"));
    EXPECT_EQ(delta.substr(0, 4), "RKC4");
    EXPECT_TRUE(h.class_counts);
    EXPECT_EQ(h.grouping, with_before ? ChunkGrouping::kByStep : ChunkGrouping::kByExponent);
    const std::string predicted =
        h.form == ChunkForm::kLinear ? Extrapolated(base, before, 4) : base;
    const std::string residual = ZigZagDifference(raw, predicted, 4);
    std::vector<std::pair<int, size_t>> order;  // (class, element): sorted, the grouped order
    std::vector<uint32_t> counts(128);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t w = word(base, i);
      int group = std::clamp(static_cast<int>(w >> 23 & 0xff) - 116, 0, 7);
      if (with_before) group += 8 * step_band(w, word(before, i));
      order.emplace_back(group, i);
      ++counts[static_cast<size_t>(group)];
    }
    std::sort(order.begin(), order.end());
    std::string grouped;
    for (const auto& [group, i] : order) grouped += residual.substr(4 * i, 4);
    // The frame: the 128 classes' counts (four bytes each), then the planes.
    ASSERT_OK_AND_ASSIGN(std::string frame,
                         ZstdDecompress(delta.substr(16 + 32), 512 + raw.size(), "c"));
    ASSERT_EQ(frame.size(), 512 + raw.size());
    for (size_t c = 0; c < counts.size(); ++c) {
      EXPECT_EQ(word(frame, c), counts[c]) << "class " << c;
    }
    EXPECT_EQ(frame.substr(512), Planes(grouped, 4)) << "with before: " << with_before;
    ASSERT_OK_AND_ASSIGN(
        std::string back,
        DecodeChunk(delta, base, "c", with_before ? std::string_view(before) : ""));
    EXPECT_EQ(back, raw);
    // As builds before the counts wrote it: the planes alone, under RKC3.
    ChunkEncodeOptions old;
    old.record_class_counts = false;
    ASSERT_OK_AND_ASSIGN(std::string uncounted, EncodeChunk(raw, 4, &b, old));
    EXPECT_EQ(uncounted.substr(0, 4), "RKC3");
    ASSERT_OK_AND_ASSIGN(std::string planes,
                         ZstdDecompress(uncounted.substr(16 + 32), raw.size(), "c"));
    EXPECT_EQ(planes, frame.substr(512));
    ASSERT_OK_AND_ASSIGN(
        back, DecodeChunk(uncounted, base, "c", with_before ? std::string_view(before) : ""));
    EXPECT_EQ(back, raw);
  }
}

// A grouped delta's recorded counts that are not its base's classes' (they sum to the chunk's
// elements, or not): DataLoss, not a read past the planes (the sanitizer builds run this too).
TEST(ChunkCodecTest, ClassCountsThatAreNotTheBasesAreDataLoss) {
  const std::string before = AsBytes(Weights(3000, 90));
  const std::string base = AsBytes(FineTuned(Weights(3000, 90), 1e-3, 91));
  const std::string raw = AsBytes(FineTuned(Weights(3000, 90), 2e-3, 92));
  const DeltaBase b{base, 1, {}, before};
  ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk(raw, 4, &b));
  ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(delta, "c"));
  ASSERT_TRUE(h.class_counts);
  ASSERT_OK_AND_ASSIGN(std::string frame, ZstdDecompress(delta.substr(48), 512 + 12000, "c"));
  const auto with_frame = [&](const std::string& f) {
    std::string out = delta.substr(0, 48);
    EXPECT_OK(ZstdCompressAppend(f, ZstdOptions{1}, &out));
    return out;
  };
  const auto count_at = [&](const std::string& f, size_t c) {
    uint32_t v;
    std::memcpy(&v, f.data() + 4 * c, 4);
    return v;
  };
  const auto set_count = [&](std::string* f, size_t c, uint32_t v) {
    std::memcpy(f->data() + 4 * c, &v, 4);
  };
  size_t largest = 0;
  for (size_t c = 1; c < 128; ++c)
    largest = count_at(frame, c) > count_at(frame, largest) ? c : largest;
  std::string moved = frame;  // one element counted in another class: the sum still right
  set_count(&moved, largest, count_at(frame, largest) - 1);
  set_count(&moved, (largest + 1) % 128, count_at(frame, (largest + 1) % 128) + 1);
  std::string all_first = frame;  // every element in class 0: reads run past class 0's part
  for (size_t c = 0; c < 128; ++c) set_count(&all_first, c, c == 0 ? 3000 : 0);
  std::string too_many = frame;
  set_count(&too_many, largest, count_at(frame, largest) + 1);
  for (const std::string* f : {&moved, &all_first, &too_many}) {
    Result<std::string> r = DecodeChunk(with_frame(*f), base, "tensor w chunk 1", before);
    EXPECT_STATUS(r, StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("tensor w chunk 1"), std::string::npos)
        << r.status().message();
  }
  ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(with_frame(frame), base, "c", before));
  EXPECT_EQ(back, raw);
}

// Grouping is for four-byte elements and needs what its classes come from.
TEST(ChunkCodecTest, AGroupedHeaderThatCannotBeIsDataLoss) {
  const std::string before = AsBytes(Weights(3000, 80));
  const std::string base = AsBytes(FineTuned(Weights(3000, 80), 1e-3, 81));
  const std::string raw = AsBytes(FineTuned(Weights(3000, 80), 2e-3, 82));
  const DeltaBase b{base, 1, {}, before};
  ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk(raw, 4, &b));
  ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(delta, "c"));
  ASSERT_EQ(h.grouping, ChunkGrouping::kByStep);
  std::string bad = delta;
  bad[5] = 2;  // two-byte elements
  EXPECT_STATUS(ReadChunkHeader(bad, "c"), StatusCode::kDataLoss);
  bad = delta;
  bad[6] = 1;  // one link deep: its base is whole and has no base of its own
  EXPECT_STATUS(ReadChunkHeader(bad, "c"), StatusCode::kDataLoss);
  bad = delta;
  bad[4] =
      static_cast<char>(static_cast<uint8_t>(bad[4]) | 0xc0);  // a grouping that does not exist
  EXPECT_STATUS(ReadChunkHeader(bad, "c"), StatusCode::kDataLoss);
  bad = delta;
  bad[3] = '2';  // grouped under the ungrouped forms' magic
  EXPECT_STATUS(ReadChunkHeader(bad, "c"), StatusCode::kDataLoss);
}

TEST(ChunkCodecTest, DeltasRoundTripBitExactAndNameTheirBase) {
  const std::string base = AsBytes(Weights(50000, 1));
  const std::string raw = AsBytes(FineTuned(Weights(50000, 1), 1e-3, 2));
  const DeltaBase b{base, 2, {}, {}};
  ASSERT_OK_AND_ASSIGN(std::string enc, EncodeChunk(raw, 4, &b));
  ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(enc, "c"));
  EXPECT_EQ(h.form, ChunkForm::kDifference) << "no base's base given: no linear delta";
  EXPECT_EQ(h.depth, 3);
  EXPECT_EQ(h.base_sha256, Sha256Hex(base));
  ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(enc, base, "c"));
  EXPECT_EQ(back, raw);
}

TEST(ChunkCodecTest, ADeltaTakesItsBasesAddressWhenGivenIt) {
  const std::string base = AsBytes(Weights(1000, 5)), raw = AsBytes(Weights(1000, 6));
  const std::string address = Sha256Hex(base);
  const DeltaBase hashed{base, 0, {}, {}}, given{base, 0, address, {}};
  ASSERT_OK_AND_ASSIGN(std::string a, EncodeChunk(raw, 4, &hashed));
  ASSERT_OK_AND_ASSIGN(std::string b, EncodeChunk(raw, 4, &given));
  EXPECT_EQ(a, b);
  const DeltaBase bad{base, 0, "not-hex", {}}, short_hash{base, 0, "abcd", {}};
  EXPECT_STATUS(EncodeChunk(raw, 4, &bad), StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeChunk(raw, 4, &short_hash), StatusCode::kInvalidArgument);
}

// Versions 0..4 of one chunk, each a step of a run from the one before (the weights keep moving
// the same way, with noise), stored as a full chunk and a chain of four deltas; from version 2 on
// each delta is told its base's base.
struct Chain {
  std::vector<std::string> raw, encoded;
  std::vector<std::string_view> Links(size_t n) const {
    return std::vector<std::string_view>(encoded.begin(), encoded.begin() + n);
  }
};
Chain MakeChain(int width, DeltaCoding coding = DeltaCoding::kAuto) {
  Chain c;
  // An odd size (not whole 8-byte words) but for 8-byte elements.
  std::vector<float> w = Weights(width == 8 ? 30002 : 30001, 7);
  const std::vector<float> direction = Weights(w.size(), 8);
  Rng rng(9);
  for (int v = 0; v < 5; ++v) {
    for (size_t i = 0; v > 0 && i < w.size(); ++i) {
      w[i] += static_cast<float>(1e-3 * direction[i] * (1.0 + 0.05 * (rng.Uniform() - 0.5)));
    }
    c.raw.push_back(AsBytes(w));
    const DeltaBase base{v > 0 ? std::string_view(c.raw[v - 1]) : "",
                         v - 1,
                         {},
                         v > 1 ? std::string_view(c.raw[v - 2]) : ""};
    ChunkEncodeOptions options;
    options.coding = v > 1 || coding != DeltaCoding::kLinear ? coding : DeltaCoding::kAuto;
    Result<std::string> enc = EncodeChunk(c.raw[v], width, v > 0 ? &base : nullptr, options);
    EXPECT_OK(enc);
    c.encoded.push_back(enc.ok() ? *enc : "");
  }
  return c;
}

TEST(ChunkCodecTest, AChainDecodesToItsLastChunkWhateverItsForms) {
  for (DeltaCoding coding : {DeltaCoding::kAuto, DeltaCoding::kXorDelta, DeltaCoding::kDifference,
                             DeltaCoding::kLinear}) {
    for (int width : {1, 2, 4, 8}) {
      const Chain c = MakeChain(width, coding);
      for (size_t n = 1; n <= c.raw.size(); ++n) {
        ASSERT_OK_AND_ASSIGN(std::string raw, DecodeChain(c.Links(n), "c"));
        EXPECT_EQ(raw, c.raw[n - 1])
            << "width " << width << ", " << n << " links, coding " << int(coding);
      }
    }
  }
}

TEST(ChunkCodecTest, AutoTakesTheLinearFormForARunAndTheDifferenceOtherwise) {
  const Chain run = MakeChain(4);
  ASSERT_OK_AND_ASSIGN(ChunkHeader second, ReadChunkHeader(run.encoded[1], "c"));
  EXPECT_EQ(second.form, ChunkForm::kDifference) << "its base is whole";
  for (size_t v = 2; v < run.encoded.size(); ++v) {
    ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(run.encoded[v], "c"));
    EXPECT_EQ(h.form, ChunkForm::kLinear) << "version " << v;
  }
  const Chain difference = MakeChain(4, DeltaCoding::kDifference);
  EXPECT_LT(run.encoded[4].size(), 0.8 * difference.encoded[4].size());
  // A fine-tune in another direction than the run took: extrapolating the run would be worse.
  std::vector<float> tuned(run.raw[4].size() / sizeof(float));
  std::memcpy(tuned.data(), run.raw[4].data(), run.raw[4].size());
  Rng rng(11);
  for (float& x : tuned) x += static_cast<float>(2e-5 * (rng.Uniform() - 0.5));
  const DeltaBase base{run.raw[4], 4, {}, run.raw[3]};
  ASSERT_OK_AND_ASSIGN(std::string enc, EncodeChunk(AsBytes(tuned), 4, &base));
  ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(enc, "c"));
  EXPECT_EQ(h.form, ChunkForm::kDifference);
  EXPECT_EQ(h.grouping, ChunkGrouping::kByStep);
  ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(enc, run.raw[4], "c", run.raw[3]));
  EXPECT_EQ(back, AsBytes(tuned));
  EXPECT_STATUS(DecodeChunk(enc, run.raw[4], "c"), StatusCode::kInvalidArgument)
      << "grouped by its base's step: a read needs the base's base";
}

TEST(ChunkCodecTest, AChainGivesTheLinkBeforeItsLast) {
  const Chain c = MakeChain(4);
  for (size_t n = 2; n <= c.raw.size(); ++n) {
    std::string last(c.raw[0].size(), '\0'), before(c.raw[0].size(), '\0');
    ASSERT_OK(DecodeChainInto(c.Links(n), "c", last.data(), last.size(), before.data()));
    EXPECT_EQ(last, c.raw[n - 1]);
    EXPECT_EQ(before, c.raw[n - 2]) << n << " links";
  }
  const Chain xor_chain = MakeChain(4, DeltaCoding::kXorDelta);
  std::string last(c.raw[0].size(), '\0'), before(c.raw[0].size(), '\0');
  ASSERT_OK(DecodeChainInto(xor_chain.Links(3), "c", last.data(), last.size(), before.data()));
  EXPECT_EQ(before, xor_chain.raw[1]) << "XOR chains too";
}

TEST(ChunkCodecTest, StoredChunksHoldTheRawBytesAndCanStartAChain) {
  const Chain c = MakeChain(4);
  const ChunkEncodeOptions off{1, /*compress=*/false};
  ASSERT_OK_AND_ASSIGN(std::string stored, EncodeChunk(c.raw[0], 4, nullptr, off));
  ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(stored, "c"));
  EXPECT_EQ(h.form, ChunkForm::kStored);
  EXPECT_EQ(h.depth, 0);
  EXPECT_EQ(stored.size(), 16 + c.raw[0].size());
  EXPECT_EQ(stored.substr(16), c.raw[0]);
  ASSERT_OK_AND_ASSIGN(std::string header, StoredChunkHeader(c.raw[0], 4));
  EXPECT_EQ(header + c.raw[0], stored) << "what a writer sends unjoined";
  EXPECT_STATUS(StoredChunkHeader(c.raw[0], 3), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(stored, "", "c"));
  EXPECT_EQ(back, c.raw[0]);
  ASSERT_OK_AND_ASSIGN(std::string alone, DecodeChain({stored}, "c"));
  EXPECT_EQ(alone, c.raw[0]);
  // Compression turned back on: the next versions are deltas against the stored chunk.
  ASSERT_OK_AND_ASSIGN(std::string two, DecodeChain({stored, c.encoded[1], c.encoded[2]}, "c"));
  EXPECT_EQ(two, c.raw[2]);
  const DeltaBase base{c.raw[0], 0, {}, {}};
  EXPECT_STATUS(EncodeChunk(c.raw[1], 4, &base, off), StatusCode::kInvalidArgument);
  EXPECT_STATUS(DecodeChunk(stored.substr(0, stored.size() - 1), "", "c"), StatusCode::kDataLoss);
}

TEST(ChunkCodecTest, ABrokenChainIsDataLoss) {
  const Chain c = MakeChain(4);
  EXPECT_STATUS(DecodeChain({}, "c"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(DecodeChain({c.encoded[1], c.encoded[2]}, "c"), StatusCode::kDataLoss)
      << "starts with a delta";
  EXPECT_STATUS(DecodeChain({c.encoded[0], c.encoded[0]}, "c"), StatusCode::kDataLoss)
      << "a full chunk in the middle";
  const std::string small_base = c.raw[0].substr(4);
  const DeltaBase small{small_base, 0, {}, {}};
  ASSERT_OK_AND_ASSIGN(std::string small_delta, EncodeChunk(c.raw[1].substr(4), 4, &small));
  EXPECT_STATUS(DecodeChain({c.encoded[0], small_delta}, "c"), StatusCode::kDataLoss)
      << "links of different sizes";
  EXPECT_STATUS(DecodeChain({c.encoded[0], c.encoded[2]}, "c"), StatusCode::kDataLoss)
      << "a linear delta right after the whole chunk";
  std::string damaged = c.encoded[2];
  damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 1);
  const Result<std::string> r = DecodeChain({c.encoded[0], c.encoded[1], damaged}, "tensor w");
  EXPECT_STATUS(r, StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("tensor w"), std::string::npos) << r.status().ToString();
}

TEST(ChunkCodecTest, AFineTunedChunkStoresSmallAgainstItsParent) {
  const std::vector<float> parent = Weights(250000, 3);  // 1 MB
  const std::string base = AsBytes(parent), raw = AsBytes(FineTuned(parent, 1e-3, 4));
  const DeltaBase b{base, 0, {}, {}};
  ASSERT_OK_AND_ASSIGN(std::string full, EncodeChunk(raw, 4, nullptr));
  ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk(raw, 4, &b));
  // Sign, exponent and the high mantissa bits do not change: about half the bytes are left.
  EXPECT_LT(delta.size(), 0.65 * raw.size()) << delta.size() << " of " << raw.size();
  EXPECT_LT(delta.size(), 0.8 * full.size());
  // Planes help a chunk alone too: the exponent bytes of similar weights repeat.
  EXPECT_LT(full.size(), 0.95 * raw.size());
  // The difference of the bit patterns beats their XOR: a carry spreads over fewer bits.
  ChunkEncodeOptions xor_options;
  xor_options.coding = DeltaCoding::kXorDelta;
  ASSERT_OK_AND_ASSIGN(std::string xored, EncodeChunk(raw, 4, &b, xor_options));
  EXPECT_LT(delta.size(), xored.size());
  // An unchanged chunk costs almost nothing as a delta.
  ASSERT_OK_AND_ASSIGN(std::string same, EncodeChunk(base, 4, &b));
  EXPECT_LT(same.size(), 200u);
}

TEST(ChunkCodecTest, BadArgumentsAreRefused) {
  EXPECT_STATUS(EncodeChunk("abc", 3, nullptr), StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeChunk("abc", 2, nullptr), StatusCode::kInvalidArgument);
  const DeltaBase short_base{"ab", 0, {}, {}}, deepest{"wxyz", kMaxChunkDepth, {}, {}},
      base{"wxyz", 0, {}, {}};
  EXPECT_STATUS(EncodeChunk("abcd", 2, &short_base), StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeChunk("abcd", 2, &deepest), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::string full, EncodeChunk("abcd", 2, nullptr));
  EXPECT_STATUS(DecodeChunk(full, "abcd", "c"), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::string delta, EncodeChunk("abcd", 2, &base));
  EXPECT_STATUS(DecodeChunk(delta, "", "c"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(DecodeChunk(delta, "xyz", "c"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(DecodeChunk(delta, "wxyz", "c", "wxyz"), StatusCode::kInvalidArgument)
      << "a base's base for a difference";
  const DeltaBase whole_with_before{"wxyz", 0, {}, "wxyz"}, short_before{"wxyz", 1, {}, "xy"};
  EXPECT_STATUS(EncodeChunk("abcd", 2, &whole_with_before), StatusCode::kInvalidArgument);
  EXPECT_STATUS(EncodeChunk("abcd", 2, &short_before), StatusCode::kInvalidArgument);
  ChunkEncodeOptions linear;
  linear.coding = DeltaCoding::kLinear;
  EXPECT_STATUS(EncodeChunk("abcd", 2, &base, linear), StatusCode::kInvalidArgument)
      << "linear without the base's base";
  const DeltaBase deep{"wxyz", 1, {}, "wxyy"};
  ASSERT_OK_AND_ASSIGN(std::string linear_delta, EncodeChunk("abcd", 2, &deep, linear));
  EXPECT_STATUS(DecodeChunk(linear_delta, "wxyz", "c"), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::string back, DecodeChunk(linear_delta, "wxyz", "c", "wxyy"));
  EXPECT_EQ(back, "abcd");
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
  EXPECT_STATUS(DecodeChunk("RKC5" + enc.substr(4), "", "c"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(DecodeChunk("RKC4" + enc.substr(4), "", "c"), StatusCode::kDataLoss)
      << "a whole chunk under the counted grouped forms' magic";
  EXPECT_STATUS(DecodeChunk("RKC3" + enc.substr(4), "", "c"), StatusCode::kDataLoss)
      << "a whole chunk under the grouped forms' magic";
  EXPECT_STATUS(DecodeChunk("RKC2" + enc.substr(4), "", "c"), StatusCode::kDataLoss)
      << "a whole chunk under the difference forms' magic";
  std::string bad = enc;
  bad[4] = 7;  // form
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  bad = enc;
  bad[5] = 3;  // width
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  bad = enc;
  bad[6] = 1;  // a full chunk with a depth
  EXPECT_STATUS(DecodeChunk(bad, "", "c"), StatusCode::kDataLoss);
  const std::string base = AsBytes(Weights(4000, 6));
  const DeltaBase b{base, 1, {}, raw};
  ChunkEncodeOptions linear;
  linear.coding = DeltaCoding::kLinear;
  ASSERT_OK_AND_ASSIGN(std::string linear_delta, EncodeChunk(raw, 4, &b, linear));
  bad = linear_delta;
  bad[6] = 1;  // a linear delta one link deep: its base would be whole
  EXPECT_STATUS(DecodeChunk(bad, base, "c", raw), StatusCode::kDataLoss);
  bad = linear_delta;
  bad[3] = '1';  // a linear delta under the old magic
  EXPECT_STATUS(DecodeChunk(bad, base, "c", raw), StatusCode::kDataLoss);
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
