#include "serve/kserve.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/random.h"
#include "serve/kserve_internal.h"
#include "testing/status_matchers.h"

namespace reel::serve {
namespace {

using ::testing::HasSubstr;

std::vector<float> FloatsOf(const Tensor& t) {
  std::vector<float> values(t.data.size() / sizeof(float));
  std::memcpy(values.data(), t.data.data(), values.size() * sizeof(float));
  return values;
}

InferRequest ClipRequest() {
  InferRequest request;
  request.id = "req-7";
  std::vector<float> clip(2 * 3 * 4);
  for (size_t i = 0; i < clip.size(); ++i) clip[i] = 0.25f * static_cast<float>(i) - 1.5f;
  request.inputs.push_back(MakeTensor("clip", DataType::kFp32, {2, 3, 4}, clip));
  request.inputs.push_back(MakeBytesTensor("video", {"abc", "d\u00e9f"}));
  request.inputs.push_back(
      MakeTensor("frames", DataType::kUint8, {3}, std::vector<uint8_t>{0, 7, 255}));
  request.outputs.push_back({"probabilities", true, std::nullopt});
  request.outputs.push_back({"labels", false, 3});
  request.timeout_us = 5000;
  request.clips = 6;
  request.timeline = true;
  return request;
}

void ExpectSameRequest(const InferRequest& a, const InferRequest& b) {
  EXPECT_EQ(a.id, b.id);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].datatype, b.inputs[i].datatype);
    EXPECT_EQ(a.inputs[i].shape, b.inputs[i].shape);
    EXPECT_EQ(a.inputs[i].data, b.inputs[i].data) << a.inputs[i].name;
  }
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    EXPECT_EQ(a.outputs[i].name, b.outputs[i].name);
    EXPECT_EQ(a.outputs[i].binary, b.outputs[i].binary);
    EXPECT_EQ(a.outputs[i].classification, b.outputs[i].classification);
  }
  EXPECT_EQ(a.timeout_us, b.timeout_us);
  EXPECT_EQ(a.clips, b.clips);
  EXPECT_EQ(a.timeline, b.timeline);
}

TEST(KServeCodec, JsonRequestRoundTrips) {
  const InferRequest request = ClipRequest();
  const Body body = EncodeInferRequest(request, /*binary=*/false);
  EXPECT_FALSE(body.json_length.has_value());
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body.bytes, std::nullopt));
  ExpectSameRequest(request, parsed);
}

TEST(KServeCodec, ARequestWithRoomPastItsEndIsParsedWhereItLiesAsACopyWouldBe) {
  const InferRequest request = ClipRequest();
  const std::string json = EncodeInferRequest(request, /*binary=*/false).bytes;
  // Whatever the bytes past the end hold, they are not part of the request.
  for (const std::string& after : {std::string(64, ' '), std::string(64, '9'), std::string(64, ']'),
                                   std::string(64, '"'), std::string(64, '\0')}) {
    const std::string buffer = json + after;
    const std::string_view body(buffer.data(), json.size());
    ASSERT_OK_AND_ASSIGN(InferRequest parsed,
                         ParseInferRequest(body, std::nullopt, {}, buffer.size()));
    ExpectSameRequest(request, parsed);
    // A truncated request is refused as it is without the room.
    const std::string_view cut(buffer.data(), json.size() - 3);
    EXPECT_STATUS(ParseInferRequest(cut, std::nullopt, {}, buffer.size()),
                  StatusCode::kInvalidArgument);
  }
}

TEST(KServeCodec, Fp32DataIsWrittenInItsShortestForm) {
  InferRequest request;
  request.inputs.push_back(
      MakeTensor("x", DataType::kFp32, {3}, std::vector<float>{0.1f, -1.25f, 3e-8f}));
  const Body body = EncodeInferRequest(request, /*binary=*/false);
  EXPECT_THAT(body.bytes, HasSubstr("[0.1,-1.25,3e-08]"));
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body.bytes, std::nullopt));
  EXPECT_EQ(parsed.inputs[0].data, request.inputs[0].data);  // the same floats, bit for bit
}

TEST(KServeCodec, BytesThatAreNotUtf8TravelAsBinary) {
  InferRequest request;
  request.inputs.push_back(MakeBytesTensor("video", {std::string("\0\xff\x80", 3), "ok"}));
  request.inputs.push_back(MakeTensor("k", DataType::kInt64, {1}, std::vector<int64_t>{3}));
  const Body body = EncodeInferRequest(request, /*binary=*/false);
  ASSERT_TRUE(body.json_length.has_value());
  EXPECT_EQ(body.bytes.substr(*body.json_length), request.inputs[0].data);
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body.bytes, body.json_length));
  ExpectSameRequest(request, parsed);
}

TEST(KServeCodec, BinaryRequestRoundTrips) {
  const InferRequest request = ClipRequest();
  const Body body = EncodeInferRequest(request, /*binary=*/true);
  ASSERT_TRUE(body.json_length.has_value());
  EXPECT_LT(*body.json_length, body.bytes.size());
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body.bytes, body.json_length));
  ExpectSameRequest(request, parsed);
}

TEST(KServeCodec, AcceptsNestedDataAndAnyKeyOrder) {
  const std::string body = R"({"inputs":[{"data":[[1,2],[3,4.5]],"shape":[2,2],
      "datatype":"FP32","name":"x"}],"id":"a"})";
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body, std::nullopt));
  ASSERT_EQ(parsed.inputs.size(), 1u);
  EXPECT_EQ(parsed.id, "a");
  EXPECT_THAT(FloatsOf(parsed.inputs[0]), ::testing::ElementsAre(1.f, 2.f, 3.f, 4.5f));
}

TEST(KServeCodec, IntegerTypesKeepTheirWidthAndSign) {
  const std::string body = R"({"inputs":[
      {"name":"a","datatype":"INT16","shape":[2],"data":[-32768,32767]},
      {"name":"b","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},
      {"name":"c","datatype":"BOOL","shape":[2],"data":[true,false]}]})";
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body, std::nullopt));
  ASSERT_EQ(parsed.inputs.size(), 3u);
  int16_t a[2];
  std::memcpy(a, parsed.inputs[0].data.data(), 4);
  EXPECT_EQ(a[0], -32768);
  EXPECT_EQ(a[1], 32767);
  uint64_t b = 0;
  std::memcpy(&b, parsed.inputs[1].data.data(), 8);
  EXPECT_EQ(b, UINT64_MAX);
  EXPECT_EQ(parsed.inputs[2].data, std::string("\1\0", 2));
}

// What the general path (simdjson's get_double, then a cast) gives for a number's text: the
// correctly rounded double, as strtod gives it.
float Reference(const std::string& text) {
  return static_cast<float>(std::strtod(text.c_str(), nullptr));
}

// Numbers in every form a client prints them: shortest float, %.17g of a float widened to double
// (Python's tolist), fixed decimals, exponents of both signs and cases, integers, more than 19
// digits, and the edges of Clinger's exact range.
std::vector<std::string> NumberTexts() {
  std::vector<std::string> texts = {"0",
                                    "-0",
                                    "1",
                                    "-1",
                                    "0.5",
                                    "-0.0",
                                    "1e5",
                                    "1E5",
                                    "1e+5",
                                    "1e-5",
                                    "2.5E-3",
                                    "123456789012345678901234",
                                    "0.000000000000000000000000000001",
                                    "9007199254740993",
                                    "9007199254740992",
                                    "1e22",
                                    "1e23",
                                    "1e-22",
                                    "1e-23",
                                    "3.4028235e38",
                                    "3.5e38",
                                    "1.4e-45",
                                    "1e-46",
                                    "1e-320",
                                    "0e500",
                                    "4.9406564584124654e-324"};
  Rng rng(11);
  const char* formats[] = {"%.9g", "%.17g", "%.2f", "%.6e", "%g", "%.0f"};
  char text[64];
  for (int i = 0; i < 3000; ++i) {
    const double magnitude = std::pow(10.0, rng.Uniform(-30, 30));
    const double value = (rng.Uniform(-1, 1)) * magnitude;
    const double widened = static_cast<double>(static_cast<float>(value));
    std::snprintf(text, sizeof(text), formats[i % 6], i % 2 ? widened : value);
    texts.emplace_back(text);
  }
  return texts;
}

// Scans `array` (which holds `texts` in order) and expects each number's bit pattern (so that -0
// and 0 differ) to be the reference's.
void ExpectScannedAsReference(const std::string& array, const std::vector<std::string>& texts) {
  std::vector<float> out(texts.size());
  ASSERT_EQ(internal::ScanNumberArray(array, 8, out.data(), static_cast<int64_t>(out.size())),
            static_cast<int64_t>(texts.size()));
  for (size_t i = 0; i < texts.size(); ++i) {
    const float want = Reference(texts[i]);
    uint32_t got_bits = 0, want_bits = 0;
    std::memcpy(&got_bits, &out[i], 4);
    std::memcpy(&want_bits, &want, 4);
    EXPECT_EQ(got_bits, want_bits) << texts[i];
  }
}

TEST(KServeNumberScanner, ReadsEveryNumberAsTheGeneralPathDoes) {
  const std::vector<std::string> texts = NumberTexts();
  // Nested two deep, with the whitespace JSON allows around every token.
  std::string array = "[ [";
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) {
      array += i % 100 == 0 ? "],\n\t[" : (i % 7 == 0 ? " ,\r\n " : (i % 5 == 0 ? ", " : ","));
    }
    array += texts[i];
  }
  array += "] ]  ";
  ExpectScannedAsReference(array, texts);
}

// Numbers of at most 8 bytes (the scanner reads them from one word): every length, sign, place of
// the dot and count of fraction digits, with random digits, among longer neighbours whose bytes
// share the word.
TEST(KServeNumberScanner, ShortNumbersOfEveryShapeReadAsTheGeneralPathDoes) {
  Rng rng = Rng::Stream(20261207, 21);
  std::vector<std::string> texts;
  for (int round = 0; round < 40; ++round) {
    for (int negative = 0; negative < 2; ++negative) {
      for (int length = 1 + negative; length <= 8; ++length) {
        const int digits_room = length - negative;
        for (int fraction = 0; fraction <= digits_room - 2; ++fraction) {
          const int whole = fraction == 0 ? digits_room : digits_room - fraction - 1;
          std::string text = negative ? "-" : "";
          for (int i = 0; i < whole; ++i) {
            const auto digit = static_cast<char>('0' + rng.Below(10));
            text += (i == 0 && whole > 1 && digit == '0') ? '7' : digit;  // no leading zero
          }
          if (fraction > 0) text += '.';
          for (int i = 0; i < fraction; ++i) text += static_cast<char>('0' + rng.Below(10));
          texts.push_back(text);
          texts.push_back("-0.000" + std::to_string(rng.Below(1000)));  // a longer neighbour
        }
      }
    }
  }
  std::string array = "[";
  for (size_t i = 0; i < texts.size(); ++i)
    array += (i > 0 ? (i % 3 == 0 ? ", " : ",") : "") + texts[i];
  array += "]";
  ExpectScannedAsReference(array, texts);
  float out[8];
  // Short forms that are not JSON numbers, between long numbers (the scanner's short path wants
  // 16 bytes on either side).
  for (const char* bad :
       {"01", "-01", "00.5", "1.", "-1.", ".5", "-.5", "1..2",   "1.2.3",   "--1",
        "-",  "1-",  "1.-2", "+1", "0x1", "1a", "1 2", "12345.", "-0.12.4", "9-9"}) {
    const std::string text =
        std::string("[-1234567.25,-1234567.25,") + bad + ",-1234567.25,-1234567.25]";
    EXPECT_EQ(internal::ScanNumberArray(text, 8, out, 8), -1) << bad;
  }
}

TEST(KServeNumberScanner, LeavesAnythingButWholeArraysOfNumbersToTheGeneralPath) {
  float out[4];
  for (const char* text :
       {"",         "1",     "[",          "[1",     "[1,",    "[1,]",    "[,1]",
        "[1 2]",    "[01]",  "[1.]",       "[.5]",   "[+1]",   "[1e]",    "[1e+]",
        "[-]",      "[--1]", "[0x10]",     "[true]", "[null]", "[\"1\"]", "[1e400]",
        "[-1e400]", "[NaN]", "[Infinity]", "[[1],2", "[{}]",   "[1;2]"}) {
    EXPECT_EQ(internal::ScanNumberArray(text, 8, out, 4), -1) << text;
  }
  EXPECT_EQ(internal::ScanNumberArray("[1,2,3,4,5]", 8, out, 4), -1) << "more than capacity";
  EXPECT_EQ(internal::ScanNumberArray("[[[1]]]", 2, out, 4), -1) << "deeper than allowed";
  EXPECT_EQ(internal::ScanNumberArray("[[[1]]]", 3, out, 4), 1);
  EXPECT_EQ(internal::ScanNumberArray("[[],[1,2],[]]", 8, out, 4), 2);
  EXPECT_EQ(internal::ScanNumberArray("[]", 8, out, 4), 0);
}

TEST(KServeCodec, Fp32DataTheScannerRefusesTakesTheGeneralPath) {
  // Every element after the first is one the scanner leaves (a number beyond its range, or JSON
  // it does not read): the request either parses as simdjson reads it or fails naming the element.
  const std::string ok = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],
      "data":[1.5, 1e-400, 123456789012345678901234567890]}]})";
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(ok, std::nullopt));
  EXPECT_THAT(FloatsOf(parsed.inputs[0]),
              ::testing::ElementsAre(1.5f, 0.f, Reference("123456789012345678901234567890")));
  for (const char* data : {"[1, true]", "[1, 1e400]", "[1, \"2\"]"}) {
    const std::string body =
        std::string(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":)") + data +
        "}]}";
    const auto bad = ParseInferRequest(body, std::nullopt);
    ASSERT_STATUS(bad, StatusCode::kInvalidArgument) << data;
    EXPECT_THAT(bad.status().message(), HasSubstr("element 1 is not a valid FP32")) << data;
  }
}

TEST(KServeNumberScanner, ReadsBytesAsPlainIntegersUpTo255) {
  uint8_t out[8];
  ASSERT_EQ(internal::ScanNumberArray("[0, 7,255,\n10,[99]]", 8, out, 8), 5);
  EXPECT_THAT(std::vector<uint8_t>(out, out + 5), ::testing::ElementsAre(0, 7, 255, 10, 99));
  // Long enough that the numbers are read where the float scanner would use its short reader.
  std::string many = "[";
  for (int i = 0; i < 300; ++i) many += std::to_string(i % 256) + (i < 299 ? "," : "]");
  std::vector<uint8_t> bytes(300);
  ASSERT_EQ(internal::ScanNumberArray(many, 8, bytes.data(), 300), 300);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(bytes[static_cast<size_t>(i)], i % 256);
  for (const char* text :
       {"[256]", "[1.0]", "[-0]", "[-1]", "[01]", "[1e2]", "[1000]", "[0x1]", "[ ]1", "[1,]"}) {
    EXPECT_EQ(internal::ScanNumberArray(text, 8, out, 8), -1) << text;
  }
}

// The whole scan's answer, and the answer of every split at a ',' of `text`: the count, and the
// numbers when the count is not -1.
template <class T>
void ExpectEverySplitReadsAsTheWhole(const std::string& text, int max_nesting, int64_t capacity) {
  std::vector<T> whole(static_cast<size_t>(capacity) + 1), split(whole.size());
  const int64_t want = internal::ScanNumberArray(text, max_nesting, whole.data(), capacity);
  for (size_t at = 0; at < text.size(); ++at) {
    if (text[at] != ',') continue;
    std::fill(split.begin(), split.end(), T{});
    const int64_t got =
        internal::ScanNumberArraySplitAt(text, at, max_nesting, split.data(), capacity);
    ASSERT_EQ(got, want) << text << " split at " << at;
    for (int64_t i = 0; i < want; ++i) {
      ASSERT_EQ(std::memcmp(&split[i], &whole[i], sizeof(T)), 0) << text << " at " << at;
    }
  }
}

TEST(KServeNumberScanner, ArraysReadInTwoHalvesReadAsInOne) {
  for (const char* text : {"[1,2,3]",
                           "[ 1 , 2 ,\n3 ] ",
                           "[[1,2],[3,4]]",
                           "[[[1]],[[2,3]],[4]]",
                           "[1,[[2]],3]",
                           "[[1,2],[3,4]]]",
                           "[1,2],3",
                           "[1,2] x",
                           "[1,2,[3]",
                           "[1,2,3",
                           "[1,,2]",
                           "[,1]",
                           "[1,2,\"3\"]",
                           "[1,2,]",
                           "[[],[1,2],[]]",
                           "[[1],[2],[3],[4],[5]]",
                           "x,[1,2]",
                           " [1,2,3]",
                           "[1,2,3,4,5]",
                           "[[1],2],[3]",
                           "[1e400,2]",
                           "[1,2,1e400]",
                           "[0.5,-0.25,1e-7,3.4e38]"}) {
    ExpectEverySplitReadsAsTheWhole<float>(text, 8, 8);
    ExpectEverySplitReadsAsTheWhole<float>(text, 2, 8);    // deeper than 2 is refused
    ExpectEverySplitReadsAsTheWhole<float>(text, 8, 4);    // more than 4 is refused
    ExpectEverySplitReadsAsTheWhole<uint8_t>(text, 8, 8);  // and as bytes
  }
  // Random short texts of the array's own characters, many of them malformed.
  Rng rng = Rng::Stream(20261206, 1);
  const std::string alphabet = "[],,,1 29.-e\"";
  for (int i = 0; i < 4000; ++i) {
    std::string text = "[";
    const int n = 1 + rng.UniformInt(14);
    for (int k = 0; k < n; ++k) text += alphabet[static_cast<size_t>(rng.UniformInt(13))];
    ExpectEverySplitReadsAsTheWhole<float>(text, 1 + rng.UniformInt(3), 1 + rng.UniformInt(6));
    ExpectEverySplitReadsAsTheWhole<uint8_t>(text, 3, 6);
  }
}

TEST(KServeNumberScanner, LargeArraysReadTheSameSplitOrNot) {
  // Over the size that is read in two halves when a spare thread is idle (256 KiB): whichever
  // way it was read, the numbers are those of the reader in one piece, and a split anywhere
  // gives them too.
  const std::vector<std::string> texts = NumberTexts();
  std::string array = "[[";
  int64_t count = 0;
  while (array.size() < (600 << 10)) {
    if (count > 0) array += count % 112 == 0 ? "],[" : ", ";
    array += texts[static_cast<size_t>(count) % texts.size()];
    ++count;
  }
  array += "]]";
  std::vector<float> whole(static_cast<size_t>(count)), got(whole.size());
  for (size_t at : {size_t{4}, array.size() / 3, array.size() / 2, array.rfind(',')}) {
    const size_t comma = array.find(',', at);
    ASSERT_NE(comma, std::string::npos);
    std::fill(whole.begin(), whole.end(), 0.f);
    ASSERT_EQ(internal::ScanNumberArraySplitAt(array, comma, 8, whole.data(), count), count);
    for (int64_t i = 0; i < count; i += 997) {
      const float want = Reference(texts[static_cast<size_t>(i) % texts.size()]);
      ASSERT_EQ(std::memcmp(&whole[i], &want, 4), 0) << i;
    }
  }
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(internal::ScanNumberArray(array, 8, got.data(), count), count);
    ASSERT_EQ(std::memcmp(got.data(), whole.data(), whole.size() * sizeof(float)), 0);
  }
  EXPECT_EQ(internal::ScanNumberArray(array, 1, got.data(), count), -1) << "two deep";
  EXPECT_EQ(internal::ScanNumberArray(array, 8, got.data(), count - 1), -1) << "one too many";
  array.insert(array.size() - 20, "\"");
  EXPECT_EQ(internal::ScanNumberArray(array, 8, got.data(), count), -1) << "a quote at the end";
}

TEST(KServeCodec, DataOfEveryShapeAndKeyOrderReadsTheSame) {
  // A scalar for a one-element shape, BYTES and UINT8 through both paths, "data" before and
  // after the fields that size it, and parameters present.
  const std::string body = R"({"inputs":[
      {"data":2.5,"datatype":"FP32","shape":[1],"name":"a"},
      {"name":"b","shape":[2],"datatype":"UINT8","data":[3, 250]},
      {"parameters":{"x":1},"data":["p","q"],"shape":[2],"name":"c","datatype":"BYTES"},
      {"datatype":"UINT8","data":[[1],[2]],"parameters":{},"name":"d","shape":[2,1]}]})";
  ASSERT_OK_AND_ASSIGN(InferRequest parsed, ParseInferRequest(body, std::nullopt));
  ASSERT_EQ(parsed.inputs.size(), 4u);
  EXPECT_THAT(FloatsOf(parsed.inputs[0]), ::testing::ElementsAre(2.5f));
  EXPECT_EQ(parsed.inputs[1].data, std::string("\x03\xfa", 2));
  ASSERT_OK_AND_ASSIGN(auto strings, parsed.inputs[2].Strings());
  EXPECT_THAT(strings, ::testing::ElementsAre("p", "q"));
  EXPECT_EQ(parsed.inputs[3].name, "d");
  EXPECT_EQ(parsed.inputs[3].data, std::string("\x01\x02", 2));
}

// CutDataArrays on small texts (a low threshold): only the value of a "data" key outside any
// string, holding no string, closed, and long enough, is cut, and each maps back to its text.
TEST(KServeCut, CutsOnlyDataArraysOutsideStrings) {
  struct Case {
    std::string json;
    std::vector<std::string> cut;  // the arrays' original texts
    std::string compact;           // when anything is cut
  };
  const std::vector<Case> cases = {
      {R"({"inputs":[{"name":"a","data" : [1,2,[3,4],5,6]}]})",
       {"[1,2,[3,4],5,6]"},
       R"({"inputs":[{"name":"a","data" : []}]})"},
      {R"({"id":"\"data\": [1,2,3,4,5,6,7]","inputs":[]})", {}, ""},
      {R"({"id":"x\\","data":[1,2,3,4,5,6,7,8]})",
       {"[1,2,3,4,5,6,7,8]"},
       R"({"id":"x\\","data":[]})"},
      {R"({"id":"x\"","data":[1,2,3,4,5,6,7,8]})",
       {"[1,2,3,4,5,6,7,8]"},
       R"({"id":"x\"","data":[]})"},
      {R"({"data":["a]","bbbbbbbb"]})", {}, ""},
      {R"({"metadata":[1,2,3,4,5,6,7,8]})", {}, ""},
      {R"(["data",[1,2,3,4,5,6,7,8]])", {}, ""},
      {R"({"data":[1,2,3,4,5,6,7,8)", {}, ""},
      {R"({"data":[1,2]})", {}, ""},  // shorter than the threshold
      {R"({"inputs":[{"data":[1.5,2.5,3.5]},{"data":[[7,8],[9,10]]}],"data":[1]})",
       {"[1.5,2.5,3.5]", "[[7,8],[9,10]]"},
       R"({"inputs":[{"data":[]},{"data":[]}],"data":[1]})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    internal::CutRequest cut;
    const bool any = internal::CutDataArrays(c.json, 8, &cut);
    EXPECT_EQ(any, !c.cut.empty());
    if (!any) continue;
    EXPECT_EQ(cut.compact, c.compact);
    ASSERT_EQ(cut.arrays.size(), c.cut.size());
    for (size_t i = 0; i < c.cut.size(); ++i) {
      const std::string_view stand_in(cut.compact.data() + cut.arrays[i].first, 2);
      EXPECT_EQ(stand_in, "[]");
      EXPECT_EQ(cut.Original(stand_in), c.cut[i]);
    }
    const std::string_view elsewhere(cut.compact.data(), 2);
    EXPECT_EQ(cut.Original(elsewhere).data(), elsewhere.data());  // stands for no array: itself
  }
}

// A request of large tensors (flat, nested, FP32 and UINT8) beside ClipRequest's small ones
// (BYTES among them), as JSON: the parse with its data arrays cut out is the parse without.
InferRequest LargeRequest() {
  InferRequest request = ClipRequest();
  std::vector<float> clip(3 * 8 * 40 * 40);
  for (size_t i = 0; i < clip.size(); ++i) clip[i] = static_cast<float>(i % 997) / 64.f - 7.f;
  request.inputs.push_back(MakeTensor("big", DataType::kFp32, {1, 3, 8, 40, 40}, clip));
  std::vector<uint8_t> bytes(40'000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  request.inputs.push_back(MakeTensor("pixels", DataType::kUint8, {40'000}, bytes));
  return request;
}

TEST(KServeCodec, LargeDataArraysAreCutOutAndReadTheSame) {
  const InferRequest request = LargeRequest();
  const Body body = EncodeInferRequest(request, false);
  internal::CutRequest cut;
  ASSERT_TRUE(internal::CutDataArrays(body.bytes, 64 * 1024, &cut));
  EXPECT_EQ(cut.arrays.size(), 2u);
  EXPECT_LT(cut.compact.size(), 1000u);
  ParseLimits whole;
  whole.cut_data_bytes = 0;
  ASSERT_OK_AND_ASSIGN(InferRequest with_cut, ParseInferRequest(body.bytes, std::nullopt));
  ASSERT_OK_AND_ASSIGN(InferRequest without, ParseInferRequest(body.bytes, std::nullopt, whole));
  ExpectSameRequest(with_cut, request);
  ExpectSameRequest(without, request);
  // The same tensor nested as its shape, and after its shape and datatype.
  std::string nested = R"({"inputs":[{"data":[)";
  for (int row = 0; row < 300; ++row) {
    nested += row == 0 ? "[" : ",[";
    for (int x = 0; x < 100; ++x) nested += (x == 0 ? "" : ",") + std::to_string(row * 100 + x);
    nested += "]";
  }
  nested += R"(],"name":"n","shape":[300,100],"datatype":"FP32"}]})";
  ASSERT_OK_AND_ASSIGN(InferRequest a, ParseInferRequest(nested, std::nullopt));
  ASSERT_OK_AND_ASSIGN(InferRequest b, ParseInferRequest(nested, std::nullopt, whole));
  ExpectSameRequest(a, b);
  ASSERT_EQ(a.inputs.size(), 1u);
  EXPECT_EQ(FloatsOf(a.inputs[0])[12'345], 12'345.f);
}

TEST(KServeParserPool, LendsEachParserOnceAndReusesReturnedOnes) {
  internal::ParserPool pool;
  const simdjson::ondemand::parser* first = nullptr;
  {
    const internal::ParserPool::Lease a = pool.Take();
    const internal::ParserPool::Lease b = pool.Take();
    first = &*a;
    EXPECT_NE(&*b, first) << "two parses at once share a parser";
  }
  const internal::ParserPool::Lease again = pool.Take();
  EXPECT_EQ(&*again, first) << "a returned parser (and its buffers) was not reused";
}

struct BadRequest {
  const char* body;
  const char* message;
};

class KServeBadRequest : public ::testing::TestWithParam<BadRequest> {};

TEST_P(KServeBadRequest, IsInvalidArgumentNamingTheProblem) {
  const auto parsed = ParseInferRequest(GetParam().body, std::nullopt);
  ASSERT_STATUS(parsed, StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KServeBadRequest,
    ::testing::Values(
        BadRequest{"", "malformed inference request"}, BadRequest{"[1,2]", "not a JSON object"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,2]})",
                   "malformed"},
        BadRequest{R"({"id":"a"})", "no inputs"}, BadRequest{R"({"inputs":[]})", "no inputs"},
        BadRequest{R"({"inputs":{}})", "\"inputs\" must be a list"},
        BadRequest{R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", "\"name\""},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP33","shape":[1],"data":[1]}]})",
                   "unknown datatype 'FP33'"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})",
                   "needs a \"shape\""},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]})",
                   "non-negative integers"},
        // Problems found before the name is read are still worded with it.
        BadRequest{R"({"inputs":[{"shape":5,"datatype":"FP32","data":[1],"name":"x"}]})",
                   "(shape of 'x')"},
        BadRequest{R"({"inputs":[{"shape":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],
                   "datatype":"FP32","data":[1],"name":"x"}]})",
                   "input 'x': over 16 dims"},
        BadRequest{R"({"inputs":[{"parameters":{"binary_data_size":-1},"datatype":"FP32",
                   "shape":[1],"name":"x"}]})",
                   "input 'x': binary_data_size must be a non-negative integer"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[2],"data":[1,1.5]}]})",
                   "element 1 is not a valid UINT8"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,2]}]})",
                   "shape [1,3] has 3 elements but data has 2"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1,2]}]})",
                   "has 1 elements but data has more"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["a"]}]})",
                   "element 0 is not a valid FP32"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[256]}]})",
                   "(256) is out of range for UINT8"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1.5]}]})",
                   "not a valid INT8"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP16","shape":[1],"data":[1]}]})",
                   "send it as binary data"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[100000000],"data":[1]}]})",
                   "more than the request's JSON can hold"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1099511627776,
                   1099511627776],"data":[1]}]})",
                   "over the limit"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})",
                   "needs \"data\" or binary_data_size"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                   "parameters":{"binary_data_size":4}}]})",
                   "both data and binary_data_size"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],
                   "parameters":{"binary_data_size":4}}]})",
                   "runs past the end of the body"},
        BadRequest{
            R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[[[[[[[[[1]]]]]]]]]}]})",
            "nested deeper than 8"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]} x)",
                   "malformed"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],
                   "parameters":{"timeout":-4}})",
                   "timeout must be a non-negative integer"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],
                   "parameters":{"clips":0}})",
                   "clips must be an integer from 1 to 256"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],
                   "parameters":{"timeline":"yes"}})",
                   "timeline must be a bool"},
        BadRequest{R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],
                   "outputs":[{"name":"y","parameters":{"classification":0}}]})",
                   "classification must be a positive integer"}));

TEST(KServeCodec, BinaryPartsMustAddUp) {
  const std::string json =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  std::string body = json + std::string(8, '\0');
  EXPECT_OK(ParseInferRequest(body, json.size()));
  const auto extra = ParseInferRequest(body + "zz", json.size());
  ASSERT_STATUS(extra, StatusCode::kInvalidArgument);
  EXPECT_THAT(extra.status().message(), HasSubstr("2 bytes after the binary inputs"));
  const std::string short_json =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}}]})";
  const auto wrong = ParseInferRequest(short_json + std::string(8, '\0'), short_json.size());
  ASSERT_STATUS(wrong, StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("needs 12 bytes but binary_data_size is 8"));
  EXPECT_STATUS(ParseInferRequest(body, body.size() + 1), StatusCode::kInvalidArgument);
}

TEST(KServeCodec, JsonLengthHeaderIsABoundedCount) {
  ASSERT_OK_AND_ASSIGN(auto none, JsonLengthHeader("", 10));
  EXPECT_FALSE(none.has_value());
  ASSERT_OK_AND_ASSIGN(auto seven, JsonLengthHeader("7", 10));
  EXPECT_EQ(seven, std::optional<size_t>(7));
  EXPECT_STATUS(JsonLengthHeader("11", 10), StatusCode::kInvalidArgument);
  EXPECT_STATUS(JsonLengthHeader("-1", 10), StatusCode::kInvalidArgument);
  EXPECT_STATUS(JsonLengthHeader("99999999999999999999999", 10), StatusCode::kInvalidArgument);
}

TEST(KServeCodec, ResponseRoundTripsWithBinaryOutputs) {
  InferResponse response;
  response.model_name = "r2plus1d";
  response.model_version = "3";
  response.id = "req-7";
  response.outputs.push_back(
      MakeTensor("probabilities", DataType::kFp32, {1, 3}, std::vector<float>{0.5f, 0.25f, 0.25f}));
  response.outputs.push_back(MakeBytesTensor("labels", {"0.5:0:Walk", "0.25:1:Run"}));
  for (bool all_binary : {false, true}) {
    const std::vector<RequestedOutput> outputs = {{"probabilities", true, std::nullopt}};
    const Body body = EncodeInferResponse(response, outputs, all_binary);
    ASSERT_TRUE(body.json_length.has_value());
    ASSERT_OK_AND_ASSIGN(InferResponse parsed, ParseInferResponse(body.bytes, body.json_length));
    EXPECT_EQ(parsed.model_name, "r2plus1d");
    EXPECT_EQ(parsed.model_version, "3");
    EXPECT_EQ(parsed.id, "req-7");
    ASSERT_EQ(parsed.outputs.size(), 2u);
    EXPECT_EQ(parsed.outputs[0].data, response.outputs[0].data);
    EXPECT_EQ(parsed.outputs[1].data, response.outputs[1].data);
    EXPECT_EQ(parsed.outputs[1].shape, std::vector<int64_t>{2});
  }
}

TEST(KServeCodec, MalformedResponseIsAnError) {
  EXPECT_STATUS(ParseInferResponse("nope", std::nullopt), StatusCode::kInvalidArgument);
  EXPECT_STATUS(
      ParseInferResponse(R"({"outputs":[{"name":1,"datatype":"FP32","shape":[1]}]})", std::nullopt),
      StatusCode::kInvalidArgument);
}

// One mutation of a valid body: flip, insert, delete or duplicate bytes, or cut it short.
std::string Mutate(std::string body, Rng* rng) {
  const int edits = 1 + rng->UniformInt(4);
  static constexpr char kTokens[] = "{}[]\",:0123456789-.eE tfnul\\\xff";
  for (int i = 0; i < edits && !body.empty(); ++i) {
    const size_t at = rng->Below(body.size());
    switch (rng->UniformInt(5)) {
      case 0:
        body[at] = static_cast<char>(body[at] ^ (1 << rng->UniformInt(8)));
        break;
      case 1:
        body.insert(at, 1, kTokens[rng->Below(sizeof(kTokens) - 1)]);
        break;
      case 2:
        body.erase(at, 1 + rng->Below(8));
        break;
      case 3:
        body.insert(at, body.substr(at, 1 + rng->Below(16)));
        break;
      default:
        body.resize(at);
    }
  }
  return body;
}

// What a parsed request promises its user: every fixed-width tensor holds exactly the bytes its
// shape and type need, and BYTES tensors split into as many elements as the shape says.
void ExpectConsistent(const InferRequest& request) {
  for (const Tensor& t : request.inputs) {
    if (ElementSize(t.datatype) > 0) {
      EXPECT_EQ(t.data.size(), static_cast<size_t>(t.elements()) * ElementSize(t.datatype));
    } else {
      auto strings = t.Strings();
      ASSERT_OK(strings);
      EXPECT_EQ(static_cast<int64_t>(strings->size()), t.elements());
    }
  }
}

// A seeded random mutator over valid JSON and binary requests: thousands of malformed bodies,
// each either parsed into a consistent request or refused with InvalidArgument; never a crash.
TEST(KServeCodecFuzz, MutatedRequestsNeverCrash) {
  const InferRequest request = ClipRequest();
  const Body seeds[] = {EncodeInferRequest(request, false), EncodeInferRequest(request, true)};
  Rng rng = Rng::Stream(20261203, 15);
  int accepted = 0;
  constexpr int kCases = 6000;
  for (int i = 0; i < kCases; ++i) {
    const Body& seed = seeds[i % 2];
    const std::string body = Mutate(seed.bytes, &rng);
    std::optional<size_t> json_length = seed.json_length;
    if (json_length && (*json_length > body.size() || rng.UniformInt(8) == 0)) {
      json_length = rng.Below(body.size() + 1);
    }
    const auto parsed = ParseInferRequest(body, json_length);
    if (parsed.ok()) {
      ++accepted;
      ExpectConsistent(*parsed);
    } else {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << parsed.status().message();
    }
    if (::testing::Test::HasFailure()) break;
  }
  // Some mutations (inside a number, the id) leave a valid request: both paths were exercised.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kCases);
}

// Mutations of a large JSON request, most of them inside its data arrays: read with the arrays
// cut out and without, each is accepted alike or refused by both.
TEST(KServeCodecFuzz, MutatedLargeRequestsParseAlikeCutOrNot) {
  const std::string seed = EncodeInferRequest(LargeRequest(), false).bytes;
  Rng rng = Rng::Stream(20261207, 15);
  ParseLimits whole;
  whole.cut_data_bytes = 0;
  int accepted = 0;
  constexpr int kCases = 600;
  for (int i = 0; i < kCases; ++i) {
    const std::string body = Mutate(seed, &rng);
    const auto cut = ParseInferRequest(body, std::nullopt);
    const auto plain = ParseInferRequest(body, std::nullopt, whole);
    ASSERT_EQ(cut.ok(), plain.ok()) << (cut.ok() ? plain : cut).status().message();
    if (cut.ok()) {
      ++accepted;
      ExpectSameRequest(*cut, *plain);
    } else {
      EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument) << cut.status().message();
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kCases);
}

}  // namespace
}  // namespace reel::serve
