// Internal to src/media: an opened container (file or memory) with its video stream chosen, the
// packet scan that builds the frame index table, and seeking to a packet of that table.
// Used by Probe and VideoDecoder. Not thread-safe: one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "media/ffmpeg_util.h"
#include "media/input.h"
#include "media/probe.h"

namespace reel::media::internal {

// One packet of the video stream, in file (decode) order.
struct PacketEntry {
  int64_t pts = AV_NOPTS_VALUE;
  int64_t dts = AV_NOPTS_VALUE;
  int64_t pos = -1;  // byte position in the file, -1 when the demuxer does not say
  int64_t duration = 0;
  bool key = false;
  bool discard = false;  // AV_PKT_FLAG_DISCARD: decoded but not shown (edit lists)
  int64_t frame = -1;    // the frame (presentation index) this packet carries; -1 if discarded
};

struct FrameTable {
  std::vector<PacketEntry> packets;   // file order
  std::vector<int64_t> frame_ts;      // per frame (presentation order): pts, or dts (counting mode)
  std::vector<int64_t> frame_packet;  // per frame: index into packets
  std::vector<int64_t> start_packet;  // per frame: the keyframe packet to decode from
  bool timestamp_mode = true;         // frames identified by pts; else by counting from packet 0
};

// What the caller knows about an input (DecodeOptions::container, analyze_streams).
struct ContainerHints {
  std::string format;           // FFmpeg's name of the container; empty: probe for it
  bool analyze_streams = true;  // avformat_find_stream_info
  bool parse_packets = true;    // AVParsers where the demuxer asks for them
};

class Demuxer {
 public:
  // Opens the container, reads stream info and picks the video stream (`stream_index`, or the
  // best one when -1). Other streams are set to be discarded by the demuxer.
  static Result<std::unique_ptr<Demuxer>> Open(const Input& input, int stream_index,
                                               const ContainerHints& hints = {});
  ~Demuxer();

  const Input& input() const { return input_; }
  AVFormatContext* format() const { return format_.get(); }
  AVStream* stream() const { return format_->streams[stream_index_]; }
  int stream_index() const { return stream_index_; }
  bool has_audio() const { return has_audio_; }

  // Reads every packet of the video stream from the current position (the start, right after
  // Open) and builds table(). Leaves the demuxer at the end; SeekToPacket(0) rewinds.
  Status Scan();
  const FrameTable& table() const { return table_; }

  // The next packet of the video stream into `packet` (unreferenced first). False at the end.
  // `index` receives its position in table().packets when known, else -1.
  Result<bool> ReadVideoPacket(AVPacket* packet, int64_t* index);

  // Positions the demuxer so that the next ReadVideoPacket returns packet `target` or an earlier
  // keyframe packet (in timestamp mode), or exactly packet 0 (counting mode: any target). Each
  // landing is checked against the table; when no seek lands acceptably the input is opened
  // again (packet 0). Returns the index of the packet it landed on. Errors: Internal when even
  // that fails.
  Result<int64_t> SeekToPacket(int64_t target);

  // VideoInfo from the header and, after Scan, the table.
  VideoInfo Describe() const;

 private:
  Demuxer(const Input& input, ContainerHints hints) : input_(input), hints_(std::move(hints)) {}
  // (Re)creates the format context (and the AVIOContext of a memory input) at the start.
  Status OpenFormat();
  // Rewinds by opening the input again; returns the packet it landed on, as Peek.
  Result<int64_t> Reopen();
  int64_t Identify(const AVPacket* packet) const;
  Result<int64_t> TrySeek(int64_t ts, int flags, bool use_seek_file);
  Result<int64_t> Peek();

  Input input_;
  ContainerHints hints_;
  // Declared before format_: the custom AVIOContext must outlive the format context.
  struct MemoryReader {
    const uint8_t* data = nullptr;
    int64_t size = 0;
    int64_t pos = 0;
    static int Read(void* opaque, uint8_t* buffer, int n);
    static int64_t Seek(void* opaque, int64_t offset, int whence);
  };
  std::unique_ptr<MemoryReader> reader_;
  AVIOContextPtr avio_;
  AVFormatInputPtr format_;
  int stream_index_ = -1;
  bool has_audio_ = false;
  FrameTable table_;
  bool scanned_ = false;
  std::unordered_map<int64_t, int64_t> by_pos_;  // pos -> packet index (when positions unique)
  std::map<std::pair<int64_t, int64_t>, int64_t> by_ts_;  // (dts, pts) -> index (otherwise)
  bool positions_unique_ = false;
  AVPacketPtr pending_;  // a packet read by Peek, returned by the next ReadVideoPacket
  bool has_pending_ = false;
};

}  // namespace reel::media::internal
