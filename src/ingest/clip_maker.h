// Turns one source video into dataset records: decodes the frames its clip plan names (resized
// to the short side, turned upright), and stores each clip as the dataset's mode asks: an H.264
// MP4 whose first frame is a keyframe (mode video) or zstd-compressed uint8 frames (mode frames).
//
// Errors (the ingest reports them per video and carries on): the decoder's (NotFound, DataLoss
// for corrupt or truncated files, Unimplemented for codecs this FFmpeg lacks, InvalidArgument),
// FailedPrecondition for a video with no frames in the requested segment, and the encoder's.
// Thread-safety: MakeClips is reentrant; each call uses its own decoder and encoder.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "dataset/layout.h"
#include "dataset/record.h"
#include "ingest/clip_plan.h"
#include "ingest/sources.h"
#include "media/decoder.h"
#include "media/frame.h"
#include "media/input.h"

namespace reel::ingest {

struct EncodeSettings {
  dataset::DatasetMode mode = dataset::DatasetMode::kVideo;
  int crf = 23;                     // video mode: x264 quality
  std::string preset = "veryfast";  // video mode: x264 speed
  int zstd_level = 3;               // frames mode
};

struct ClipJob {
  const SourceVideo* video = nullptr;
  std::string class_name;
  std::string key_base;    // sample keys are key_base + "_c" + clip number (3+ digits)
  std::string source_uri;  // recorded in each record's metadata
};

// What the decoder made of a video: the size its frames come out at (short side resized, upright)
// and the rate its clips are stored at (the resampling rate, else the source's average).
struct CutVideo {
  int width = 0;
  int height = 0;
  int rate_num = 25;
  int rate_den = 1;
};

// Where a video's ingest spent its time, in seconds of one thread; summed over videos by the
// ingest report. open: reading the container's index and opening the decoder; decode: demuxing
// and libavcodec; convert: libswscale's resize and conversion (and orientation);
// encode: x264 (video mode) or zstd (frames mode).
struct StageTimes {
  double open_s = 0, decode_s = 0, convert_s = 0, encode_s = 0;
  StageTimes& operator+=(const StageTimes& o) {
    open_s += o.open_s;
    decode_s += o.decode_s;
    convert_s += o.convert_s;
    encode_s += o.encode_s;
    return *this;
  }
};

// Receives one planned clip's decoded frames; an error stops the cut and is returned.
using ClipSink = std::function<Status(const CutVideo&, const PlannedClip&,
                                      const std::vector<media::Frame>& frames)>;

// Decodes `input` once, reading forward, and hands each clip `clip` plans inside the segment
// [start_s, end_s) (< 0: the video's start / end) to `sink`, in clip order, as frames of
// decode.format (RGB24 unless asked; video mode's encoder takes YUV420P). This is the cut the
// ingest stores and the server classifies, so both see the same frames.
// `decode`: the format, the decoder's threads and what else the cut does not set (the size is the
// clip's; the ingest runs one video per worker on one thread).
// `spent`, when given, gains the open, decode and convert times (the sink's time is the caller's).
Status CutClips(const media::Input& input, double start_s, double end_s, const ClipSettings& clip,
                const ClipSink& sink, const media::DecodeOptions& decode = {},
                StageTimes* spent = nullptr);

// The records of every clip of the video, in clip order; `times`, when given, gains where the
// time went.
Result<std::vector<dataset::Record>> MakeClips(const ClipJob& job, const media::Input& input,
                                               const ClipSettings& clip,
                                               const EncodeSettings& encode,
                                               StageTimes* times = nullptr);

}  // namespace reel::ingest
