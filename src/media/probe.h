// Probe: what a video is, read from its container and a scan of its packets, without decoding.
//
// The packet scan reads every packet of the video stream once (file order) and builds the frame
// index table: every frame's presentation timestamp (the packet's pts, or its dts where the
// container stores no pts, as AVI does), sorted into presentation order, so that frame i <-> pts.
// Packets the container marks as discarded (MP4 edit lists that cut the first frames, e.g. a
// first keyframe that is decoded but never shown) are not frames. The table gives the exact frame
// count where the container gives none (Matroska, WebM) or a wrong one (edit lists), the
// keyframes as frame indices, and the mapping VideoDecoder uses to find frames frame-accurately.
//
// Errors: NotFound (no such file), PermissionDenied, DataLoss (not a media file FFmpeg can read,
// or a truncated or corrupt container; the message carries FFmpeg's text), InvalidArgument (no
// video stream, or ProbeOptions::stream_index is not a video stream), ResourceExhausted.
// A codec this FFmpeg cannot decode is not an error here (VideoDecoder::Open reports it).
//
// Thread-safety: Probe may run concurrently on any inputs, including the same one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "media/input.h"

namespace reel::media {

struct Rational {
  int num = 0;
  int den = 1;
  double value() const { return den == 0 ? 0.0 : static_cast<double>(num) / den; }
};

struct VideoInfo {
  std::string name;          // the Input's name
  std::string container;     // FFmpeg's demuxer name: "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm"
  int stream_index = -1;     // the video stream described, within the container
  std::string codec;         // "h264", "hevc", "vp9", "av1", "mpeg4", ...
  std::string pixel_format;  // the decoder's native format: "yuv420p", "yuv420p10le", ...
  int64_t bit_rate = 0;      // of the video stream, bits/s; 0 when unknown
  bool has_audio = false;

  int width = 0;  // of decoded frames as stored (coded size after cropping)
  int height = 0;
  int rotation = 0;       // clockwise degrees to turn frames for display: 0, 90, 180 or 270
                          // (the display matrix, av_display_rotation_get, rounded to 90)
  bool mirrored = false;  // the display matrix also flips the picture
  int display_width = 0;  // width and height after rotation (sample aspect ratio not applied)
  int display_height = 0;
  Rational sample_aspect_ratio;  // 0/1 when unknown

  Rational frame_rate;               // average frame rate (the container's, else from the scan)
  bool variable_frame_rate = false;  // frame durations differ (scan: by more than 1 tick and 1%)
  double start_time_s = 0;           // presentation time of the first frame (not always 0)
  double duration_s = 0;             // from the first frame's start to the last frame's end

  int64_t frame_count = 0;  // frames in the stream: one per shown packet (packet scan), what a
                            // full decode of an intact file yields; without a scan the
                            // container's count, or -1 when it gives none
  int64_t container_frame_count = -1;  // what the container header says; -1 when it says nothing
  bool scanned = false;  // the packet scan ran: frame_count, keyframes and the table are exact

  // Frame indices (presentation order) of the keyframes; random access seeks to these.
  std::vector<int64_t> keyframes;

  // The frame index table (empty when not scanned): frame_pts[i] is frame i's presentation
  // timestamp in units of time_base, ascending.
  Rational time_base;
  std::vector<int64_t> frame_pts;
  // False when packets carry no presentation timestamps (AVI with B-frames): the table then
  // holds decode timestamps, frames are identified by counting from the start of the file, and
  // random access decodes from the start.
  bool has_presentation_timestamps = true;

  // Frame i's time in seconds from the first frame (0 for frame 0). Requires a scan.
  double FrameTime(int64_t index) const;
  // The frame whose time (as FrameTime) is nearest to `seconds`, ties to the earlier frame; -1
  // when `seconds` is negative, beyond duration_s, or the table is empty.
  int64_t NearestFrame(double seconds) const;
};

struct ProbeOptions {
  // Scan every packet of the video stream (see the top of this file). Without it only the
  // container's header is read: frame_count is the container's (or -1), keyframes and the table
  // stay empty, and variable_frame_rate is guessed from the header's two frame rates.
  bool scan_packets = true;
  // The video stream to describe; -1 picks FFmpeg's best video stream (av_find_best_stream,
  // never a cover picture).
  int stream_index = -1;
};

Result<VideoInfo> Probe(const Input& input, const ProbeOptions& options = {});

}  // namespace reel::media
