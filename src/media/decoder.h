// VideoDecoder: frame-accurate decoding of chosen frames, and sequential decoding of whole videos.
//
// Frames are numbered 0..frame_count-1 in presentation order by the packet scan Open runs (see
// probe.h); frame i is always the same picture, whatever was decoded before, and it is the i-th
// frame `ffmpeg -i F` outputs for the same stream. Requests are sorted and decoded in file order.
// The decoder seeks (to the keyframe the target needs, BACKWARD) only when such a keyframe lies
// beyond what it has already read, i.e. when seeking skips packets that decoding forward would
// have to decode; after a seek it flushes and decodes forward to the target's timestamp. So a
// request for frames [5, 250, 10, 251] of a video with keyframes at 0 and 235 decodes 0..10,
// seeks once, and decodes 235..251: in file order, no packet twice. On the way it drops the
// non-reference frames it was not asked for (DecodeOptions::skip_unrequested). stats() counts
// what happened.
//
// Output: Frame (frame.h) in RGB24 (default), GRAY8 or YUV420P, turned as the video's display
// matrix says (like the ffmpeg command line's autorotation), optionally resized and centre-cropped.
// With format YUV420P, a YUV420P video, no resize and no crop, the decoder's pixels are copied
// untouched: bit-exact with `ffmpeg -noautorotate -i F -f rawvideo -pix_fmt yuv420p`, and with
// ffmpeg's autorotated output when autorotate is on (turning planes is lossless). Every other
// output goes through swscale with the video's colour matrix and range (BT.601 limited when
// untagged); at the video's own size that matches ffmpeg's `-pix_fmt rgb24` exactly on every
// shared test video.
// Frame::index is the frame's index, Frame::timestamp_s its time from the first frame.
//
// Frames are matched to indices by their presentation timestamps. Where packets carry none (AVI
// with B-frames, VideoInfo::has_presentation_timestamps false) they are counted from the start
// of the file instead, so every backward request decodes from the start.
//
// Errors (messages name the input and, for decoding, the packet and frame):
//   NotFound, PermissionDenied, DataLoss, InvalidArgument   Open: as Probe (probe.h)
//   Unimplemented      Open: no decoder for the codec in this FFmpeg build
//   InvalidArgument    Open: bad options; requests: frame indices outside [0, frame_count)
//   OutOfRange         DecodeAt: a time before 0 or after the video's duration
//   DataLoss           the decoder rejected a packet it had to decode on the way to a requested
//                      frame, flagged that frame as corrupt, or never produced it (corrupt or
//                      truncated video). With DecodeOptions::skip_corrupt, ReadNext and
//                      ForEachFrame skip such frames instead.
//   ResourceExhausted  out of memory
//   Internal           an FFmpeg failure that is not the input's fault (the message says which)
// After an error the decoder remains usable: the next request starts from a fresh seek.
//
// Ownership: the decoder keeps a copy of the Input (so memory inputs stay alive with it).
// Thread-safety: one VideoDecoder belongs to one thread at a time; distinct decoders (even of the
// same Input) may run concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "media/frame.h"
#include "media/input.h"
#include "media/probe.h"
#include "media/scaler.h"

namespace reel::media {

struct DecodeOptions {
  PixelFormat format = PixelFormat::kRgb24;

  // Resize (sizes are after rotation, i.e. of the displayed picture): either width and height
  // both > 0, or short_side > 0 (aspect ratio kept, long side truncated as ShortSideSize), or
  // neither (frames keep their size). Sizes are at most 16384.
  int width = 0;
  int height = 0;
  int short_side = 0;
  Interpolation interpolation = Interpolation::kBilinear;
  // Centre crop after the resize: both > 0 or both 0. Must fit in the (resized) frame.
  int crop_width = 0;
  int crop_height = 0;

  // Turn frames as the display matrix says. Off: frames as stored (`ffmpeg -noautorotate`).
  bool autorotate = true;

  // Decoder threads with frame threading (FF_THREAD_FRAME). 1 by default because ingest decodes
  // many videos in parallel; 0 lets FFmpeg pick from the number of cores.
  int threads = 1;
  // Frames of fewer pixels than this decode on one thread whatever `threads` says. Frame threads
  // gain little on small frames, where each frame waits for nearly all of the one it refers to,
  // and every thread's context is allocated and cleared at open (threads() says what was used).
  int64_t frame_threads_min_pixels = 0;

  // Sequential reads (ReadNext, ForEachFrame) skip frames the decoder cannot produce from a
  // corrupt packet instead of failing with DataLoss. DecodeFrames / DecodeAt always fail when a
  // requested frame cannot be produced.
  bool skip_corrupt = false;

  // The video stream to decode; -1 picks the best one (as Probe).
  int stream_index = -1;

  // DecodeFrames / DecodeAt have the decoder drop non-reference frames (most B-frames) that lie
  // before the last frame requested and are not requested themselves: nothing needs them, and
  // a clip of every third frame, or a seek to a clip, otherwise decodes them all. Only where
  // frames are matched by timestamps (VideoInfo::has_presentation_timestamps); the frames
  // returned are the same either way. Sequential reads decode every frame.
  bool skip_unrequested = true;

  // What the caller knows of the input, for the clips Reel's own ingest wrote (a shard's MP4
  // records, one H.264 stream each, every timestamp in the index): the container's FFmpeg name
  // ("mp4"), so that FFmpeg does not probe for it; that its header says all the decoder needs,
  // so that no frame is decoded to find out (avformat_find_stream_info); and that its index says
  // what each packet is, so that no parser reads their headers. Together they are over a third
  // of opening and decoding a 2 KiB clip of 8 frames. Without the analysis VideoInfo::pixel_format
  // is empty. An input in another container fails to open (InvalidArgument or DataLoss); one whose
  // header or index is incomplete may decode wrongly, so the defaults probe and analyse.
  std::string container;
  bool analyze_streams = true;
  bool parse_packets = true;

  // When this decoder closes, keep its libavcodec context (flushed) and swscale set-up for the
  // next decoder the same thread opens on a stream of equal parameters and extradata (the
  // loader's workers open thousands of small clips alike): opening an H.264 decoder allocates
  // and clears its context, and swscale plans its filters, a fifth of such a clip's time once
  // the options above are set. Single-threaded decoders only; a thread keeps its latest 4 (for
  // clips of a few sizes) until it ends. A flushed context decodes as a fresh one (a seek
  // flushes).
  bool reuse_on_thread = false;
};

// How to open an MP4 clip Reel's ingest wrote (a shard's video record): RGB24, one decoder
// thread, the container named, no stream analysis or packet parsing, the decoder kept on the
// thread. The loader and the loader bench's decode limit open records this way.
DecodeOptions OwnClipOptions();

// What a decoder has done since Open (or ResetStats).
struct DecodeStats {
  int64_t packets_read = 0;     // video packets given to the decoder
  int64_t frames_decoded = 0;   // frames the decoder produced (including ones not returned)
  int64_t frames_returned = 0;  // frames handed to the caller
  int64_t seeks = 0;            // container seeks (the rewind at Open not counted)
  int64_t corrupt_packets = 0;  // packets the decoder rejected
  // The highest packet (file order) read so far, and how many times reading went backwards
  // (a seek to an earlier packet than one already read).
  int64_t max_packet_index = -1;
  int64_t backward_seeks = 0;
  // Seconds spent turning decoded frames into the output format and size (libswscale, the copy
  // out, orientation and crop): the rest of a decode call is demuxing and libavcodec.
  double convert_s = 0;
  // Opened on the decoder a closed one left (DecodeOptions::reuse_on_thread).
  bool decoder_reused = false;
};

class VideoDecoder {
 public:
  // Opens the input, scans its packets (see probe.h) and opens the decoder.
  static Result<std::unique_ptr<VideoDecoder>> Open(const Input& input,
                                                    const DecodeOptions& options = {});
  virtual ~VideoDecoder() = default;

  // The probe of the decoded stream (scanned: frame count, keyframes, frame table).
  virtual const VideoInfo& info() const = 0;
  // The decoder threads FFmpeg runs, as it set them at open (its choice where threads is 0).
  virtual int threads() const = 0;
  // Width and height of the frames this decoder returns (after rotation, resize, crop).
  virtual int output_width() const = 0;
  virtual int output_height() const = 0;

  // The frames at `indices`, returned in the order requested (duplicates allowed).
  virtual Result<std::vector<Frame>> DecodeFrames(const std::vector<int64_t>& indices) = 0;
  virtual Result<Frame> DecodeFrame(int64_t index) = 0;
  // For each time (seconds from the first frame, as Frame::timestamp_s), the nearest frame
  // (VideoInfo::NearestFrame).
  virtual Result<std::vector<Frame>> DecodeAt(const std::vector<double>& seconds) = 0;

  // Sequential reading: the next frame after the previous ReadNext, or after the highest frame
  // the last DecodeFrames / DecodeAt returned, or at SeekToFrame's index (frame 0 at first);
  // nullopt after the last frame. Reading on decodes forward without seeking.
  virtual Result<std::optional<Frame>> ReadNext() = 0;
  // Makes the next ReadNext return frame `index` (0 <= index <= frame_count).
  virtual Status SeekToFrame(int64_t index) = 0;
  // Calls `on_frame` for frames [begin, end) in order (end = -1: to the last frame). A non-OK
  // status from `on_frame` stops the loop and is returned as is.
  virtual Status ForEachFrame(const std::function<Status(Frame&&)>& on_frame, int64_t begin = 0,
                              int64_t end = -1) = 0;

  virtual DecodeStats stats() const = 0;
  virtual void ResetStats() = 0;
};

}  // namespace reel::media
