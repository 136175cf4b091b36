#include "ingest/clip_plan.h"

#include <algorithm>
#include <cmath>

namespace reel::ingest {

Status ValidateClipSettings(const ClipSettings& s) {
  if (s.clip_frames < 1) return InvalidArgumentError("clip_frames must be at least 1");
  if (s.frame_stride < 1) return InvalidArgumentError("frame_stride must be at least 1");
  if (s.clip_stride < 0) return InvalidArgumentError("clip_stride must not be negative");
  if (s.fps < 0 || !std::isfinite(s.fps))
    return InvalidArgumentError("fps must be positive (or 0 for the source rate)");
  if (s.short_side < 2 || s.short_side > 4096)
    return InvalidArgumentError("short_side must be in [2, 4096]");
  if (s.max_clips_per_video < 0)
    return InvalidArgumentError("max_clips_per_video must not be negative");
  return Status::Ok();
}

namespace {

// The frame index whose time is nearest to t (earlier one on a tie).
int64_t NearestFrame(const std::vector<double>& times, double t) {
  auto it = std::lower_bound(times.begin(), times.end(), t);
  if (it == times.begin()) return 0;
  if (it == times.end()) return static_cast<int64_t>(times.size()) - 1;
  int64_t after = it - times.begin();
  return (*it - t) < (t - times[after - 1]) ? after : after - 1;
}

}  // namespace

std::vector<PlannedClip> PlanClips(const std::vector<double>& frame_times, double segment_start_s,
                                   double segment_end_s, const ClipSettings& s) {
  std::vector<PlannedClip> clips;
  if (frame_times.empty()) return clips;
  // The last frame lasts one average frame interval.
  double interval = frame_times.size() > 1
                        ? (frame_times.back() - frame_times.front()) / (frame_times.size() - 1)
                        : 1.0 / 25;
  double video_end = frame_times.back() + interval;
  double start = segment_start_s >= 0 ? segment_start_s : frame_times.front();
  double end = segment_end_s >= 0 ? std::min(segment_end_s, video_end) : video_end;
  if (end <= start) return clips;

  // Samples: source frames inside the segment, or times on the resampled grid.
  std::vector<int64_t> samples;
  std::vector<double> sample_times;
  if (s.fps > 0) {
    for (int64_t k = 0;; ++k) {
      double t = start + k / s.fps;
      if (t >= end - 1e-9) break;
      samples.push_back(NearestFrame(frame_times, t));
      sample_times.push_back(t);
    }
  } else {
    for (size_t i = 0; i < frame_times.size(); ++i) {
      if (frame_times[i] >= start - 1e-9 && frame_times[i] < end - 1e-9) {
        samples.push_back(static_cast<int64_t>(i));
        sample_times.push_back(frame_times[i]);
      }
    }
  }
  if (samples.empty()) return clips;
  const double sample_interval = s.fps > 0 ? 1.0 / s.fps : interval;
  const int64_t span = static_cast<int64_t>(s.clip_frames - 1) * s.frame_stride + 1;
  const int64_t stride =
      s.clip_stride > 0 ? s.clip_stride : static_cast<int64_t>(s.clip_frames) * s.frame_stride;
  const int64_t n = static_cast<int64_t>(samples.size());

  std::vector<int64_t> starts;
  for (int64_t first = 0; first + span <= n; first += stride) starts.push_back(first);
  if (starts.empty()) {
    PlannedClip clip;
    clip.padded = true;
    for (int i = 0; i < s.clip_frames; ++i) {
      clip.frames.push_back(
          samples[std::min<int64_t>(static_cast<int64_t>(i) * s.frame_stride, n - 1)]);
    }
    clip.start_s = sample_times.front();
    clip.end_s = sample_times.back() + sample_interval;
    clips.push_back(std::move(clip));
    return clips;
  }
  if (s.max_clips_per_video > 0 && static_cast<int>(starts.size()) > s.max_clips_per_video) {
    // Spread the kept clips evenly over the video, always including the first and last.
    std::vector<int64_t> kept;
    int m = s.max_clips_per_video;
    for (int i = 0; i < m; ++i) {
      size_t pick = m == 1 ? starts.size() / 2
                           : static_cast<size_t>(std::llround(static_cast<double>(i) *
                                                              (starts.size() - 1) / (m - 1)));
      kept.push_back(starts[pick]);
    }
    starts = kept;
  }
  for (size_t c = 0; c < starts.size(); ++c) {
    PlannedClip clip;
    clip.index = static_cast<int>(c);
    for (int i = 0; i < s.clip_frames; ++i)
      clip.frames.push_back(samples[starts[c] + static_cast<int64_t>(i) * s.frame_stride]);
    clip.start_s = sample_times[starts[c]];
    clip.end_s = sample_times[starts[c] + span - 1] + sample_interval;
    clips.push_back(std::move(clip));
  }
  return clips;
}

}  // namespace reel::ingest
