#include "media/ffmpeg_util.h"

extern "C" {
#include <libavutil/error.h>
#include <libavutil/log.h>
}

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <mutex>

#include "base/logging.h"

namespace reel::media::internal {
namespace {

thread_local std::string g_last_error_line;

void LogCallback(void* avcl, int level, const char* fmt, va_list vl) {
  // Cheap exit for the chatty levels before any formatting.
  if (level > AV_LOG_WARNING) return;
  static const std::shared_ptr<spdlog::logger> logger = Logger("ffmpeg");
  if (level > AV_LOG_ERROR && !logger->should_log(spdlog::level::debug)) return;

  char line[1024];
  int print_prefix = 1;
  av_log_format_line2(avcl, level, fmt, vl, line, sizeof(line), &print_prefix);
  size_t n = std::strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  if (n == 0) return;
  if (level <= AV_LOG_ERROR) {
    // For Status messages: "[h264 @ 0x55d1c0] text" -> "h264: text".
    std::string text(line, n);
    if (!text.empty() && text[0] == '[') {
      size_t close = text.find("] ");
      if (close != std::string::npos) {
        std::string who = text.substr(1, close - 1);
        size_t at = who.find(" @ ");
        if (at != std::string::npos) who.resize(at);
        text = who + ": " + text.substr(close + 2);
      }
    }
    g_last_error_line = std::move(text);
    logger->warn("{}", line);
  } else {
    logger->debug("{}", line);
  }
}

}  // namespace

AVFramePtr MakeFrame() { return AVFramePtr(av_frame_alloc()); }
AVPacketPtr MakePacket() { return AVPacketPtr(av_packet_alloc()); }

Status OutOfMemory(std::string_view context) {
  return ResourceExhaustedError(std::string(context) + ": out of memory");
}

void EnsureFfmpegLogging() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(&LogCallback); });
}

std::string AvErrorString(int averror) {
  char buffer[AV_ERROR_MAX_STRING_SIZE] = {0};
  if (av_strerror(averror, buffer, sizeof(buffer)) < 0) {
    return "FFmpeg error " + std::to_string(averror);
  }
  return buffer;
}

std::string TakeLastFfmpegLogLine() {
  std::string line;
  line.swap(g_last_error_line);
  return line;
}

Status AvErrorToStatus(int averror, std::string_view context) {
  std::string message(context);
  if (!message.empty()) message += ": ";
  message += AvErrorString(averror);
  std::string detail = TakeLastFfmpegLogLine();
  if (!detail.empty()) message += " (" + detail + ")";

  StatusCode code = StatusCode::kInternal;
  if (averror == AVERROR(ENOENT) || averror == AVERROR(ENOTDIR)) {
    code = StatusCode::kNotFound;
  } else if (averror == AVERROR(EACCES) || averror == AVERROR(EPERM)) {
    code = StatusCode::kPermissionDenied;
  } else if (averror == AVERROR(ENOMEM) || averror == AVERROR(EMFILE) ||
             averror == AVERROR(ENOSPC)) {
    code = StatusCode::kResourceExhausted;
  } else if (averror == AVERROR_INVALIDDATA || averror == AVERROR_EOF) {
    code = StatusCode::kDataLoss;
  } else if (averror == AVERROR_DECODER_NOT_FOUND || averror == AVERROR_DEMUXER_NOT_FOUND ||
             averror == AVERROR_ENCODER_NOT_FOUND || averror == AVERROR_MUXER_NOT_FOUND ||
             averror == AVERROR_PROTOCOL_NOT_FOUND || averror == AVERROR_PATCHWELCOME ||
             averror == AVERROR(ENOSYS)) {
    code = StatusCode::kUnimplemented;
  } else if (averror == AVERROR(EINVAL) || averror == AVERROR_OPTION_NOT_FOUND) {
    code = StatusCode::kInvalidArgument;
  } else if (averror == AVERROR(EIO) || averror == AVERROR(ETIMEDOUT)) {
    code = StatusCode::kUnavailable;
  }
  return Status(code, std::move(message));
}

AVPixelFormat ToAVPixelFormat(PixelFormat format) {
  switch (format) {
    case PixelFormat::kRgb24:
      return AV_PIX_FMT_RGB24;
    case PixelFormat::kGray8:
      return AV_PIX_FMT_GRAY8;
    case PixelFormat::kYuv420p:
      return AV_PIX_FMT_YUV420P;
  }
  return AV_PIX_FMT_NONE;
}

}  // namespace reel::media::internal
