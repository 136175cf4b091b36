// Test support for the media tests: where the shared videos are, the ffmpeg command line as the
// reference decoder, synthetic frames, and picture comparisons. Header-only; tests only.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/status.h"
#include "media/encoder.h"
#include "media/frame.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace reel::media::testing {

// $REEL_SOURCE_DIR/testdata/videos (real clips; testdata/README.md gives their origins).
inline std::string SharedVideosDir() { return reel::testing::SourcePath("testdata/videos"); }
inline std::string SharedVideo(const std::string& name) { return SharedVideosDir() + "/" + name; }

// Stops the whole test binary with one clear message when the shared videos are not where the
// tests expect them, instead of a cascade of failures on missing files.
class SharedVideosPresent : public ::testing::Environment {
 public:
  void SetUp() override {
    struct stat st;
    ASSERT_TRUE(::stat(SharedVideosDir().c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        << "the shared test videos are not at " << SharedVideosDir()
        << " (they are part of the repository: is REEL_SOURCE_DIR the checkout?)";
  }
};
inline ::testing::Environment* const kSharedVideosPresent =
    ::testing::AddGlobalTestEnvironment(new SharedVideosPresent);

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using reel::testing::ShellQuote;

// Runs `command` with /bin/sh and returns its stdout; an error when it exits non-zero.
inline Result<std::string> RunCommand(const std::string& command) {
  reel::testing::CommandResult result = reel::testing::RunCommand(command);
  if (result.exit_code != 0) {
    return InternalError("command failed (exit " + std::to_string(result.exit_code) +
                         "): " + command);
  }
  return result.output;
}

// Whether the ffmpeg and ffprobe command lines can run (checked once).
inline bool HaveFfmpegCli() {
  static const bool have = std::system("ffmpeg -version >/dev/null 2>&1") == 0 &&
                           std::system("ffprobe -version >/dev/null 2>&1") == 0;
  return have;
}

inline const char* FfmpegPixFmt(PixelFormat format) {
  switch (format) {
    case PixelFormat::kRgb24:
      return "rgb24";
    case PixelFormat::kGray8:
      return "gray";
    case PixelFormat::kYuv420p:
      return "yuv420p";
  }
  return "rgb24";
}

// One output of FfmpegFrames: frames in `format`, `width` x `height` as ffmpeg outputs them
// (after its autorotation unless `autorotate` is false).
struct FfmpegOutput {
  PixelFormat format = PixelFormat::kRgb24;
  bool autorotate = true;
  int width = 0;
  int height = 0;
};

// Frames `indices` (as the decoder outputs them: the select filter's n) of stream
// `stream_index`, decoded by the ffmpeg command line once per distinct autorotate setting and
// written to every output in one run. Result[o][k] is output o's frame indices[k].
inline Result<std::vector<std::vector<Frame>>> FfmpegFrames(
    const std::string& path, int stream_index, const std::vector<int64_t>& indices,
    const std::vector<FfmpegOutput>& outputs) {
  reel::testing::TempDir temp;  // removed with the frames when this returns
  const std::string& dir = temp.path();
  std::string select;
  for (int64_t i : indices) {
    if (!select.empty()) select += "+";
    select += "eq(n\\," + std::to_string(i) + ")";
  }
  // Input 0 without autorotation, input 1 with it.
  std::string command =
      "ffmpeg -nostdin -v error -noautorotate -i " + ShellQuote(path) + " -i " + ShellQuote(path);
  for (size_t o = 0; o < outputs.size(); ++o) {
    command += " -map " + std::string(outputs[o].autorotate ? "1:" : "0:") +
               std::to_string(stream_index) + " -vf " + ShellQuote("select=" + select) +
               " -fps_mode passthrough -f rawvideo -pix_fmt " + FfmpegPixFmt(outputs[o].format) +
               " " + dir + "/out" + std::to_string(o) + ".raw";
  }
  Result<std::string> ran = RunCommand(command + " 2>&1");
  std::vector<std::vector<Frame>> result;
  Status status;
  if (!ran.ok()) status = ran.status();
  for (size_t o = 0; o < outputs.size() && status.ok(); ++o) {
    const FfmpegOutput& out = outputs[o];
    std::string bytes = ReadFileOrEmpty(dir + "/out" + std::to_string(o) + ".raw");
    size_t size = Frame::ByteSize(out.width, out.height, out.format);
    if (bytes.size() != size * indices.size()) {
      status = InternalError("ffmpeg wrote " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(size * indices.size()) + ": " + command);
      break;
    }
    std::vector<Frame> frames;
    for (size_t k = 0; k < indices.size(); ++k) {
      Frame f = Frame::Make(out.width, out.height, out.format);
      std::copy(bytes.begin() + k * size, bytes.begin() + (k + 1) * size, f.data.begin());
      f.index = indices[k];
      frames.push_back(std::move(f));
    }
    result.push_back(std::move(frames));
  }
  if (!status.ok()) return status;
  return result;
}

struct Difference {
  int max_abs = 0;
  double mean_abs = 0;
  double psnr = 0;  // dB; infinity when identical
};

inline Difference Compare(const Frame& a, const Frame& b) {
  Difference d;
  if (a.data.size() != b.data.size() || a.data.empty()) {
    d.max_abs = 255;
    d.mean_abs = 255;
    return d;
  }
  double sum_abs = 0, sum_sq = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    int diff = std::abs(static_cast<int>(a.data[i]) - static_cast<int>(b.data[i]));
    d.max_abs = std::max(d.max_abs, diff);
    sum_abs += diff;
    sum_sq += static_cast<double>(diff) * diff;
  }
  d.mean_abs = sum_abs / a.data.size();
  double mse = sum_sq / a.data.size();
  d.psnr = mse == 0 ? INFINITY : 10.0 * std::log10(255.0 * 255.0 / mse);
  return d;
}

// A smooth moving gradient (triangle waves, no wrap-around edges) with a moving bright square:
// easy to encode, and the motion is visible.
inline Frame GradientFrame(int width, int height, int t) {
  auto wave = [](int v) {
    v %= 510;
    return static_cast<uint8_t>(v > 255 ? 510 - v : v);
  };
  Frame f = Frame::Make(width, height, PixelFormat::kRgb24);
  const int sx = (t * 2) % std::max(1, width), sy = t % std::max(1, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = f.Pixel(x, y);
      p[0] = wave(x * 255 / std::max(1, width - 1) + 3 * t);
      p[1] = wave(y * 255 / std::max(1, height - 1) + 2 * t);
      p[2] = wave((x + y) * 2 + 5 * t);
      if (x >= sx && x < sx + width / 6 && y >= sy && y < sy + height / 6) {
        p[0] = p[1] = p[2] = 235;
      }
    }
  }
  f.index = t;
  return f;
}

// An H.264 video whose YUV planes are tagged with colour matrix `matrix` (H.273's numbers:
// 1 BT.709, 6 BT.601, 9 BT.2020) and full or limited range: a luma ramp under chroma that changes
// every frame, colourful but mostly inside the RGB cube, so that a wrong matrix or range moves
// pixels by several levels. Even sizes.
inline Result<std::string> TaggedVideo(int width, int height, int frames, int matrix,
                                       bool full_range) {
  EncoderOptions options;
  options.width = width;
  options.height = height;
  options.input = PixelFormat::kYuv420p;
  options.color_matrix = matrix;
  options.full_range = full_range;
  REEL_ASSIGN_OR_RETURN(auto encoder, VideoEncoder::Create(options));
  const int cw = width / 2, ch = height / 2;
  for (int t = 0; t < frames; ++t) {
    Frame frame = Frame::Make(width, height, PixelFormat::kYuv420p);
    frame.color_matrix = matrix;
    frame.full_range = full_range;
    uint8_t* y = frame.data.data();
    uint8_t* u = y + static_cast<size_t>(width) * height;
    uint8_t* v = u + static_cast<size_t>(cw) * ch;
    for (int i = 0; i < width * height; ++i) {
      const int ramp = (i % width) * 255 / (width - 1);
      y[i] = static_cast<uint8_t>(full_range ? ramp : 16 + ramp * 219 / 255);
    }
    for (int i = 0; i < cw * ch; ++i) {
      u[i] = static_cast<uint8_t>((i % cw) < cw / 2 ? 88 + t : 168 - t);
      v[i] = static_cast<uint8_t>((i / cw) < ch / 2 ? 168 - t : 98 + t);
    }
    REEL_RETURN_IF_ERROR(encoder->Add(frame));
  }
  return encoder->Finish();
}

// What phones and screen recorders write: BT.709 at full range.
inline Result<std::string> FullRangeBt709Video(int width, int height, int frames) {
  return TaggedVideo(width, height, frames, /*matrix=*/1, /*full_range=*/true);
}

}  // namespace reel::media::testing
