// Internal to src/media: RAII owners for FFmpeg handles, FFmpeg errors as Status values, and the
// mapping between Reel's PixelFormat and FFmpeg's. Nothing outside src/media includes this (the
// public headers do not expose FFmpeg types).
//
// Every FFmpeg handle media allocates lives in one of the unique_ptr types below from the moment
// it is created, so that every error path frees it (the pattern of ggml's ggml-cpp.h).
//
// FFmpeg's log: the first call of EnsureFfmpegLogging() (made by every entry point of media)
// routes av_log through the "ffmpeg" spdlog logger (errors at warn, warnings at debug) instead of
// FFmpeg's own stderr printer, and remembers per thread the last error line FFmpeg logged, which
// AvErrorToStatus appends to the message ("Invalid NAL unit size (-1 > 551)" says more than
// "Invalid data found when processing input").
//
// Thread-safety: free functions are safe from any thread; the owned handles follow FFmpeg's rules
// (one context per thread at a time).
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavutil/frame.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "media/frame.h"

namespace reel::media::internal {

struct AVFormatInputDeleter {
  void operator()(AVFormatContext* ctx) const { avformat_close_input(&ctx); }
};
struct AVFormatOutputDeleter {
  // Frees the muxer context only; its custom AVIOContext is owned separately.
  void operator()(AVFormatContext* ctx) const { avformat_free_context(ctx); }
};
struct AVIOContextDeleter {
  void operator()(AVIOContext* ctx) const {
    if (ctx == nullptr) return;
    av_freep(&ctx->buffer);  // may have been reallocated by FFmpeg; free what it holds now
    avio_context_free(&ctx);
  }
};
struct AVCodecContextDeleter {
  void operator()(AVCodecContext* ctx) const { avcodec_free_context(&ctx); }
};
struct AVFrameDeleter {
  void operator()(AVFrame* frame) const { av_frame_free(&frame); }
};
struct AVPacketDeleter {
  void operator()(AVPacket* packet) const { av_packet_free(&packet); }
};
struct SwsContextDeleter {
  void operator()(SwsContext* ctx) const { sws_freeContext(ctx); }
};
struct AVDictionaryDeleter {
  void operator()(AVDictionary* dict) const { av_dict_free(&dict); }
};

using AVFormatInputPtr = std::unique_ptr<AVFormatContext, AVFormatInputDeleter>;
using AVFormatOutputPtr = std::unique_ptr<AVFormatContext, AVFormatOutputDeleter>;
using AVIOContextPtr = std::unique_ptr<AVIOContext, AVIOContextDeleter>;
using AVCodecContextPtr = std::unique_ptr<AVCodecContext, AVCodecContextDeleter>;
using AVFramePtr = std::unique_ptr<AVFrame, AVFrameDeleter>;
using AVPacketPtr = std::unique_ptr<AVPacket, AVPacketDeleter>;
using SwsContextPtr = std::unique_ptr<SwsContext, SwsContextDeleter>;

// Allocations that cannot fail short of memory exhaustion; on failure they return nullptr and
// callers turn that into ResourceExhausted with OutOfMemory().
AVFramePtr MakeFrame();
AVPacketPtr MakePacket();
Status OutOfMemory(std::string_view context);

// Installs the av_log callback once per process (see the top of this file).
void EnsureFfmpegLogging();

// FFmpeg's text for an error code (av_strerror).
std::string AvErrorString(int averror);

// An FFmpeg error code as a Status: "context: FFmpeg's message (last line FFmpeg logged)".
// ENOENT -> NotFound, EACCES/EPERM -> PermissionDenied, ENOMEM -> ResourceExhausted,
// AVERROR_INVALIDDATA / AVERROR_EOF (a truncated file) -> DataLoss, *_NOT_FOUND and
// PATCHWELCOME -> Unimplemented, EINVAL -> InvalidArgument, EIO -> Unavailable, else Internal.
// `context` should name the file ("clip.mp4: opening").
Status AvErrorToStatus(int averror, std::string_view context);

// The last error line FFmpeg logged on this thread since the last call (then cleared).
std::string TakeLastFfmpegLogLine();

// PixelFormat <-> AVPixelFormat.
AVPixelFormat ToAVPixelFormat(PixelFormat format);

}  // namespace reel::media::internal
