#include "media/probe.h"

#include <algorithm>
#include <cmath>

#include "media/demuxer.h"

namespace reel::media {

double VideoInfo::FrameTime(int64_t index) const {
  if (index < 0 || index >= static_cast<int64_t>(frame_pts.size())) return 0.0;
  return static_cast<double>(frame_pts[index] - frame_pts[0]) * time_base.value();
}

int64_t VideoInfo::NearestFrame(double seconds) const {
  if (frame_pts.empty() || std::isnan(seconds) || seconds < 0 || seconds > duration_s + 1e-9) {
    return -1;
  }
  // Compare in seconds: frame times are exact multiples of the time base.
  auto time = [&](size_t i) { return FrameTime(static_cast<int64_t>(i)); };
  size_t lo = 0, hi = frame_pts.size();  // first frame with time >= seconds
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (time(mid) < seconds) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == frame_pts.size()) return static_cast<int64_t>(frame_pts.size()) - 1;
  if (lo == 0) return 0;
  double after = time(lo) - seconds, before = seconds - time(lo - 1);
  return static_cast<int64_t>(after < before ? lo : lo - 1);
}

Result<VideoInfo> Probe(const Input& input, const ProbeOptions& options) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<internal::Demuxer> demuxer,
                        internal::Demuxer::Open(input, options.stream_index));
  if (options.scan_packets) REEL_RETURN_IF_ERROR(demuxer->Scan());
  return demuxer->Describe();
}

}  // namespace reel::media
