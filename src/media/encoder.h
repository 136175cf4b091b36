// H.264 encoding (libx264 through libavcodec) of RGB24 frames into a complete MP4 file in memory,
// used by ingest (re-encoding clips with a keyframe at every clip start) and datagen; and
// animated PNG (`codec = "apng"`), used by reel ui for clip previews.
//
// The file is written through a custom AVIOContext (write + seek into a growing buffer), so the
// muxer finishes it normally: for MP4 the moov atom follows the frames (no faststart). Frames are
// converted RGB24 -> YUV420P by swscale (BT.601, limited range, and the stream says so). With
// gop > 0 keyframes fall exactly on frames 0, gop, 2*gop, ... (x264's scene-cut keyframes are
// off). x264 needs even sizes for 4:2:0: an odd width or height is padded by one column/row that
// repeats the last one, so the video is then (width+1)&~1 x (height+1)&~1. With threads = 1 the
// bytes are a deterministic function of the frames and options.
//
// Errors: InvalidArgument for bad options (size outside 1..16384, frame rate not positive, crf
// outside 0..51, an unknown preset or container, a container that cannot hold H.264), and from
// Add for a frame that is not RGB24 of the configured size; FailedPrecondition for Add or Finish
// after Finish; Unavailable when this FFmpeg build has no libx264; Internal for an FFmpeg failure
// (the message carries FFmpeg's text).
// Thread-safety: one encoder per thread; distinct encoders may run concurrently.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "media/frame.h"

namespace reel::media {

struct EncoderOptions {
  int width = 0;  // of the frames passed to Add
  int height = 0;
  int fps_num = 25;  // frame rate as a fraction
  int fps_den = 1;
  int gop = 0;   // keyframe every `gop` frames; 0 = libx264's default
  int crf = 23;  // quality: 0 lossless .. 51 worst
  std::string preset = "veryfast";
  int threads = 1;                // encoder threads; 1 keeps parallelism at the caller's level
  std::string container = "mp4";  // muxer name: "mp4", "matroska", "avi", ...
  // "libx264" (H.264, the above) or "apng": an animated PNG of the RGB24 frames as they are
  // (lossless; gop, crf and preset do not apply; container "apng"), which browsers show as an
  // image (reel ui's clip previews).
  std::string codec = "libx264";
  // The frames Add takes (libx264): RGB24, converted here to BT.601 limited-range YUV, or
  // YUV420P, encoded as they are with the colour matrix and range below (the frames' own tags,
  // which the stream records so that a decoder turns them into the same RGB).
  PixelFormat input = PixelFormat::kRgb24;
  int color_matrix = Frame::kUnspecifiedMatrix;
  bool full_range = false;
};

class VideoEncoder {
 public:
  static Result<std::unique_ptr<VideoEncoder>> Create(const EncoderOptions& options);
  virtual ~VideoEncoder() = default;
  // Frames must be of the configured size and input format (and colour, for YUV420P); they get
  // consecutive timestamps.
  virtual Status Add(const Frame& frame) = 0;
  // Flushes the encoder, writes the container trailer, and returns the file's bytes.
  // The encoder cannot be used afterwards.
  virtual Result<std::string> Finish() = 0;
};

}  // namespace reel::media
