// Which source frames make up each clip of a video: the sampling rule every ingest mode shares.
//
// A video's frames are resampled to `fps` (0 keeps the source rate): sample k sits at time
// start + k / fps and takes the source frame whose presentation time is nearest (ties go to the
// earlier frame). Clip c is `clip_frames` samples taken `frame_stride` apart, starting at sample
// c * clip_stride. Only clips that fit entirely inside the segment are planned; a video shorter
// than one clip gives a single clip padded by repeating its last frame (marked `padded`), so
// short videos are not silently dropped.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace reel::ingest {

struct ClipSettings {
  int clip_frames = 16;         // frames per clip
  int frame_stride = 1;         // samples between consecutive frames of a clip
  int clip_stride = 0;          // samples between clip starts; 0 = clip_frames * frame_stride
  double fps = 0;               // resampling rate; 0 = the source's own frames
  int short_side = 128;         // output frames are resized so their shorter side is this
  int max_clips_per_video = 0;  // 0 = every clip; otherwise that many, spread evenly
};

// InvalidArgument for non-positive sizes, strides or rates.
Status ValidateClipSettings(const ClipSettings& settings);

struct PlannedClip {
  int index = 0;                // clip number within the video
  std::vector<int64_t> frames;  // source frame indices (presentation order), clip_frames long
  double start_s = 0;           // time of the first and one past the last sample
  double end_s = 0;
  bool padded = false;
};

// `frame_times` are the presentation times (seconds from the first frame, ascending) of the
// video's frames. `segment_start_s` / `segment_end_s` < 0 mean the start / the end of the video.
std::vector<PlannedClip> PlanClips(const std::vector<double>& frame_times, double segment_start_s,
                                   double segment_end_s, const ClipSettings& settings);

}  // namespace reel::ingest
